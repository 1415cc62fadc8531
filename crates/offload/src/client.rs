//! The off-loading client core (Everest §3.2): a sans-I/O state machine between an upper layer
//! issuing block reads and writes, its base volume, and the stores of its store set.
//!
//! # Driver contract
//!
//! ```text
//! let mut c = Client::format(config, stores, now)    // new volume: writes the store set
//!          or Client::recover(config, now)           // restart: reads it, asks every store
//! loop {
//!     while let Some(op) = c.poll_base()   { base volume ← op }        // reads, writes (durable?)
//!     while let Some((store, id, request)) = c.poll_store() { send to store }
//!     while let Some((id, reply)) = c.poll_upward() { answer the upper layer }
//!     wait for: an upward request      → c.handle_upward(now, id, request)
//!               a base completion      → c.handle_base(now, done)
//!               a store reply          → c.handle_store(now, store, id, reply, load)
//!               a load broadcast       → c.handle_load(store, load)
//!               c.poll_timeout()       → c.handle_timeout(now)
//! }
//! ```
//!
//! # What it guarantees
//!
//! - A read returns, for every byte, the last acknowledged write or one issued concurrently.
//! - A write is acknowledged upward only once its data is durable: on the base volume (when
//!   asked for durability) or on every store it was sent to that did not fail; the range map is
//!   updated before the acknowledgement.
//! - The three invariants of Everest §3.2.3 hold and are asserted: a version is deleted only once
//!   it is on the base volume or a higher version is on a store; a write overlapping off-loaded
//!   data is off-loaded with a higher version; the highest off-loaded version of a range is
//!   deleted only once every older copy is deleted (or a deletion record for it is durable).
//! - Versions are `generation << 40 | counter`, the generation being bumped and persisted on
//!   every start, so versions never repeat across crashes.

use std::collections::{BTreeMap, HashMap, VecDeque};

use cordillera_types::rangemap::RangeMap;
use cordillera_vstore::store::{Extent, Reply, Request, StoreError};

use crate::records::{companion, DeletionRecord, ENTRIES_MAX, SLOT_SHIFT};
use crate::superblock::{Superblock, SuperblockError, STORES_MAX, SUPERBLOCK_BYTES};

pub type Nanos = u64;
/// A store's position in the client's store set.
pub type StoreIdx = usize;
/// A range a store returned, with its bytes.
type Piece = (Extent, Vec<u8>);
/// `(start, end, version)`.
type Span = (u64, u64, u64);

const VERSION_BITS: u32 = 40;
/// The client id used for probes of stores that are down (it never owns data).
const PROBE_CLIENT: u64 = u64::MAX;
/// Deletes in flight per store at most.
const DELETES_IN_FLIGHT_MAX: u64 = 256;

/// When writes are off-loaded (Everest §4.1's three configurations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Never off-load.
    Baseline,
    /// Off-load every write; never reclaim.
    Always,
    /// Off-load while the base volume is loaded (T_base, T_store); reclaim when it is not.
    Peak,
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
    /// A write that must be off-loaded and that every store, all up, refuses as full waits
    /// this long (reclaim runs meanwhile whatever the base volume's load) before it is
    /// answered [`ClientError::NoSpace`] (ENOSPC): a full store never stalls a volume.
    pub full_timeout_ns: Nanos,
    /// A restarting client waits this long for every store of its set. After it, it serves
    /// without the stores that failed to answer, if they are at most `n_way - 1` (so that
    /// every acknowledged write still has a copy among those that answered), treating them as
    /// failed; with more missing it keeps waiting ([`Client::recovery_wait`] says for what).
    /// If the superblock is marked degraded (a write was acknowledged with fewer than
    /// `n_way` copies since the last time every copy was whole), no store may be missing: the
    /// client waits for every store, however long.
    pub recovery_grace_ns: Nanos,
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
            recovery_grace_ns: 1_000_000_000,
        }
    }

    /// Bytes the upper layer can address.
    pub fn usable_bytes(&self) -> u64 {
        self.volume_bytes - SUPERBLOCK_BYTES
    }
}

/// A store in the store set: its identity and the server it lives on (N copies go to N servers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoreInfo {
    pub id: u64,
    pub server: u64,
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
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaseDone {
    Read { id: u64, data: Vec<u8> },
    Written { id: u64 },
}

/// Where the latest version of a range is: its version, the stores holding it (a bit per store
/// index) and whether it has been reclaimed to the base volume (its copies are being deleted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub version: u64,
    pub stores: u64,
    pub on_base: bool,
}

/// A stale copy on one store, waiting for its delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stale {
    /// Delete versions up to this one.
    version: u64,
    /// A delete is in flight.
    sent: bool,
    /// A deletion record for it is being written.
    recording: bool,
    /// The durable deletion record naming it: it no longer blocks invariant 3.
    slot: Option<u64>,
}

/// One store as the client sees it ([`Client::store_figures`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreFigures {
    pub info: StoreInfo,
    pub up: bool,
    pub removed: bool,
    pub in_flight: u64,
    pub reported_load: u64,
    pub offloaded_bytes: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes whose latest version is off-loaded now.
    pub offloaded_bytes: u64,
    pub offloaded_writes: u64,
    pub offloaded_write_bytes: u64,
    pub base_writes: u64,
    pub base_reads: u64,
    pub store_reads: u64,
    pub reclaimed_bytes: u64,
    pub reclaim_reads: u64,
    pub deletes_sent: u64,
    pub deletion_records_written: u64,
    pub deletion_records_collected: u64,
    pub store_failures: u64,
    /// Off-loaded bytes lost: a store holding their only copy was removed or lost them.
    pub lost_bytes: u64,
    /// Reads that found a store without a copy it had acknowledged (a damaged log): the copy
    /// is dropped from the range map and read elsewhere.
    pub lost_copies: u64,
    pub recoveries: u64,
    /// Writes answered [`ClientError::NoSpace`].
    pub refused_writes: u64,
}

struct StoreState {
    info: StoreInfo,
    removed: bool,
    up: bool,
    down_since: Nanos,
    next_probe: Nanos,
    probing: bool,
    reported_load: u64,
    in_flight: u64,
    /// Deletes in flight (capped, so a store short of space is not flooded).
    deletes_in_flight: u64,
    /// When the store last answered anything, and when it last went from idle to busy: a
    /// store silent for the timeout while requests are outstanding has failed (a slow answer
    /// to one request, e.g. a delete waiting for log space, is not a failure).
    last_heard: Nanos,
    busy_since: Nanos,
    /// read_any may find data for us.
    may_hold: bool,
    /// read_any requests in flight, and how many may be: a store offers its records in turn
    /// and offers them again once all were, so more requests than it has records to offer only
    /// read the same records again. The window doubles (up to N_reclaim) while answers bring
    /// new work and falls back to one when one does not.
    any_in_flight: u64,
    any_window: u64,
    /// No read_any before this: the last one found only data being settled or still being
    /// written, which the store offers again until that work is done.
    reclaim_after: Nanos,
    /// Successful writes so far (a read_any answering "nothing" clears `may_hold` only if no
    /// write succeeded since it was sent).
    writes_acked: u64,
    stale: RangeMap<Stale>,
    stale_dirty: bool,
    /// No deletion record for this (failed) store before this: the last one was refused by a
    /// holder (e.g. a full log), and writing it again at once would only be refused again.
    record_after: Nanos,
    /// Missed at a recovery: the deletion records it holds from earlier lives (copies of
    /// records also held by stores that answered) are deleted when it returns, up to this
    /// version; `true` while that delete is in flight.
    old_records: Option<(u64, bool)>,
}

enum Pending {
    Write {
        op: u64,
    },
    Read {
        read: u64,
        start: u64,
        end: u64,
        /// The version the range map named for the range when the read was sent.
        version: u64,
    },
    ReclaimAny {
        writes_acked: u64,
    },
    ReclaimRead,
    Delete {
        start: u64,
        end: u64,
        version: u64,
    },
    RecordWrite {
        slot: u64,
    },
    RecordGc {
        slot: u64,
    },
    Metadata,
    /// The companion's metadata: which deletion records to read.
    RecordsMeta,
    Records,
    Probe,
    /// Deletes a returning store's deletion records from earlier lives.
    ClearRecords,
}

struct Outstanding {
    store: StoreIdx,
    pending: Pending,
}

struct WriteOp {
    up_id: u64,
    start: u64,
    data: Vec<u8>,
    durable: bool,
    version: u64,
    /// Stores asked and not yet answered, answered with success, and failed (not retried).
    waiting: u32,
    succeeded: u64,
    tried: u64,
    /// Parts a newer write took while this one was in flight (it completed first, see
    /// `supersede`): the newer one wins there (deletes owed for it may remove this copy).
    superseded: Vec<(u64, u64)>,
    /// When every store first refused it as full.
    full_since: Option<Nanos>,
}

struct ReadOp {
    up_id: u64,
    start: u64,
    len: u64,
    /// Empty until the first piece arrives: a piece covering the whole read becomes the
    /// buffer as it is (no copy); otherwise the pieces are copied into `len` bytes.
    buf: Vec<u8>,
    outstanding: u32,
}

enum BaseKind {
    UpWrite { up_id: u64 },
    UpRead { read: u64, start: u64 },
    Reclaim { job: u64 },
    Superblock,
}

/// A reclaim whose base write is done, waiting for older copies to go, then for its own copies.
struct Settle {
    start: u64,
    end: u64,
    version: u64,
    deleting: bool,
}

struct DelRecordInfo {
    target: StoreIdx,
    version: u64,
    /// Length of the record's payload (the range it occupies in the companion's space).
    bytes: u64,
    holders: u64,
    /// Holders still to acknowledge the write (while being written).
    writing: u64,
    entries: Vec<(u64, u64, u64)>,
    /// Being garbage-collected: holders with a delete in flight.
    collecting: u64,
    collect: bool,
}

enum Phase {
    /// Writing the store set of a new volume.
    Formatting,
    /// Reading the store set.
    ReadingSuperblock,
    /// Asking every store for its metadata and deletion records.
    Fetching(Fetch),
    Ready,
    Failed(SuperblockError),
}

struct Fetch {
    superblock_written: bool,
    /// The superblock says "degraded": some acknowledged data may have fewer than N copies,
    /// so every store must answer.
    all_needed: bool,
    metadata: Vec<Option<Vec<Extent>>>,
    records: Vec<Option<Vec<Piece>>>,
    retry_at: Vec<Option<Nanos>>,
    /// Stores that failed a fetch request (down, refusing, recovering, silent) at least once.
    failed: Vec<bool>,
    started: Nanos,
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

pub struct Client {
    config: Config,
    phase: Phase,
    generation: u64,
    next_counter: u64,
    stores: Vec<StoreState>,
    map: RangeMap<Loc>,
    next_id: u64,
    outstanding: BTreeMap<u64, Outstanding>,
    writes: HashMap<u64, WriteOp>,
    reads: HashMap<u64, ReadOp>,
    base_pending: HashMap<u64, BaseKind>,
    /// Base I/Os in flight from the upper layer and from reclaim.
    base_in_flight: u64,
    /// Load on the base volume that is not ours (a co-hosted store), told by the driver.
    external_base_load: u64,
    queued_upward: VecDeque<(u64, Upward)>,
    parked_reads: Vec<(u64, u64, u64)>,
    parked_writes: Vec<u64>,
    /// Since when the stores refuse writes as full (cleared by a write a store accepts):
    /// reclaim then runs whatever the base volume's load.
    stores_full_since: Option<Nanos>,
    /// Parked writes are tried again then (stores may have room, or the range may no longer
    /// need to be off-loaded).
    parked_retry_at: Option<Nanos>,
    reclaim_jobs: usize,
    /// Reclaim jobs writing to the base volume: the spans written and writes left.
    reclaim_writes: HashMap<u64, (Vec<Span>, u32)>,
    /// Ranges with a reclaim write to the base volume in flight (by job). A newer version of
    /// an overlapping range waits for it: the disk may complete concurrent writes in any order.
    reclaiming: RangeMap<u64>,
    settling: Vec<Settle>,
    /// Something a settling reclaim waits for may have changed (a stale list, a deletion
    /// record, the range map): `pump_settle` looks at every entry again only then.
    settle_dirty: bool,
    vulnerable: VecDeque<(u64, u64)>,
    /// Some acknowledged data may have fewer than N copies on stores (see
    /// [`Superblock::degraded`]): wanted in the superblock, and what the last superblock write
    /// that completed holds. Writes acknowledged with fewer than N copies wait in `held_acks`
    /// until the flag is durable; it is cleared (checked at most every probe interval, once
    /// the vulnerable ranges are reclaimed) when no range in the map has fewer than N.
    degraded: bool,
    degraded_durable: bool,
    held_acks: Vec<u64>,
    degraded_check_at: Nanos,
    /// One superblock write at a time (the disk may complete concurrent writes in any
    /// order): the flag it carries, and whether the superblock changed since it was sent.
    superblock_in_flight: Option<bool>,
    superblock_dirty: bool,
    next_reclaim_store: usize,
    records: BTreeMap<u64, DelRecordInfo>,
    next_slot: u64,
    base_out: VecDeque<BaseOp>,
    store_out: VecDeque<(StoreIdx, u64, Request)>,
    upward_out: VecDeque<(u64, UpReply)>,
    stats: Stats,
    now: Nanos,
}

fn bit(s: StoreIdx) -> u64 {
    1u64 << s
}

fn indices(mask: u64) -> impl Iterator<Item = StoreIdx> {
    (0..64).filter(move |&i| mask & (1 << i) != 0)
}

impl Client {
    fn empty(config: Config, stores: Vec<StoreInfo>, phase: Phase, now: Nanos) -> Client {
        assert!(config.n_way >= 1, "n_way ≥ 1");
        assert!(config.volume_bytes > SUPERBLOCK_BYTES, "volume too small");
        let stores = stores
            .into_iter()
            .map(|info| new_store_state(info, now))
            .collect();
        Client {
            config,
            phase,
            generation: 1,
            next_counter: 1,
            stores,
            map: RangeMap::new(),
            next_id: 1,
            outstanding: BTreeMap::new(),
            writes: HashMap::new(),
            reads: HashMap::new(),
            base_pending: HashMap::new(),
            base_in_flight: 0,
            external_base_load: 0,
            queued_upward: VecDeque::new(),
            parked_reads: Vec::new(),
            parked_writes: Vec::new(),
            stores_full_since: None,
            parked_retry_at: None,
            reclaim_jobs: 0,
            reclaim_writes: HashMap::new(),
            reclaiming: RangeMap::new(),
            settling: Vec::new(),
            settle_dirty: false,
            vulnerable: VecDeque::new(),
            degraded: false,
            degraded_durable: false,
            held_acks: Vec::new(),
            degraded_check_at: now,
            superblock_in_flight: None,
            superblock_dirty: false,
            next_reclaim_store: 0,
            records: BTreeMap::new(),
            next_slot: 0,
            base_out: VecDeque::new(),
            store_out: VecDeque::new(),
            upward_out: VecDeque::new(),
            stats: Stats::default(),
            now,
        }
    }

    /// A client for a new volume: writes the store set (generation 1) to the base volume.
    pub fn format(config: Config, stores: Vec<StoreInfo>, now: Nanos) -> Client {
        assert!(stores.len() <= STORES_MAX, "at most 64 stores");
        let mut c = Client::empty(config, stores, Phase::Formatting, now);
        c.write_superblock();
        c
    }

    /// A client restarting on an existing volume: reads the store set, then rebuilds its soft
    /// state from every store's metadata (waiting for stores that are recovering themselves).
    pub fn recover(config: Config, now: Nanos) -> Client {
        let mut c = Client::empty(config, Vec::new(), Phase::ReadingSuperblock, now);
        let id = c.id();
        c.base_pending.insert(id, BaseKind::Superblock);
        c.base_out.push_back(BaseOp::Read {
            id,
            offset_bytes: c.config.usable_bytes(),
            length_bytes: SUPERBLOCK_BYTES,
        });
        c.stats.recoveries += 1;
        c
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready)
    }

    /// Since when every store refuses the writes that must be off-loaded as full (`None`
    /// when they are not full): the runtime reports it (WARN, metric).
    pub fn stores_full_since(&self) -> Option<Nanos> {
        self.stores_full_since
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Per store in the store set (by index, removed ones included): whether it is up, its
    /// requests in flight, its last reported load, and the bytes whose latest version it holds
    /// and that are not yet on the base volume. Walks the range map: for reports, not per I/O.
    pub fn store_figures(&self) -> Vec<StoreFigures> {
        let mut out: Vec<StoreFigures> = self
            .stores
            .iter()
            .map(|s| StoreFigures {
                info: s.info,
                up: s.up,
                removed: s.removed,
                in_flight: s.in_flight,
                reported_load: s.reported_load,
                offloaded_bytes: 0,
            })
            .collect();
        for (start, end, loc) in self.map.iter() {
            if loc.on_base {
                continue;
            }
            for (i, f) in out.iter_mut().enumerate() {
                if loc.stores & (1 << i) != 0 {
                    f.offloaded_bytes += end - start;
                }
            }
        }
        out
    }

    /// Why the client cannot start (its store set is missing or damaged), if it cannot.
    pub fn failure(&self) -> Option<ClientError> {
        match &self.phase {
            Phase::Failed(e) => Some(ClientError::NoStoreSet(*e)),
            _ => None,
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Changes when writes are off-loaded from now on (e.g. "always" for a burst, then "peak"
    /// so that the data is reclaimed). Data already off-loaded stays correct under any policy.
    pub fn set_policy(&mut self, policy: Policy) {
        self.config.policy = policy;
    }

    /// The store set (removed stores excluded), by index.
    pub fn stores(&self) -> Vec<(StoreIdx, StoreInfo, bool)> {
        self.stores
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.removed)
            .map(|(i, s)| (i, s.info, s.up))
            .collect()
    }

    /// The range map: every off-loaded range and where its latest version is.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64, &Loc)> + '_ {
        self.map.iter()
    }

    /// Nothing off-loaded, nothing owed to any store, no deletion record left.
    pub fn is_quiescent(&self) -> bool {
        self.map.is_empty()
            && self.stores.iter().all(|s| s.stale.is_empty())
            && self.records.is_empty()
            && self
                .stores
                .iter()
                .all(|s| s.removed || s.old_records.is_none())
            && self.settling.is_empty()
            && self.reclaim_jobs == 0
            && !self.degraded
            && self.superblock_in_flight.is_none()
    }

    /// A one-line account of the client's state, for diagnostics.
    pub fn describe(&self) -> String {
        let phase = match &self.phase {
            Phase::Formatting => "formatting",
            Phase::ReadingSuperblock => "reading the store set",
            Phase::Fetching(_) => "fetching metadata",
            Phase::Ready => "ready",
            Phase::Failed(_) => "failed",
        };
        let stores: Vec<String> = self
            .stores
            .iter()
            .map(|s| {
                format!(
                    "{}{}(load {}, in flight {}, stale {})",
                    s.info.id,
                    if s.removed {
                        "x"
                    } else if s.up {
                        ""
                    } else {
                        "↓"
                    },
                    s.reported_load,
                    s.in_flight,
                    s.stale.len()
                )
            })
            .collect();
        format!(
            "{phase}{}; ranges {}; writes {} (parked {}); reads {} (parked {}); queued {}; base in flight {}; store requests {}; reclaim jobs {}; settling {}; records {}; vulnerable {}; stores {}",
            match (self.degraded, self.degraded_durable) {
                (false, false) => "",
                (true, true) => " (degraded)",
                (true, false) => " (degraded, not durable yet)",
                (false, true) => " (degraded, clearing)",
            },
            self.map.len(),
            self.writes.len(),
            self.parked_writes.len(),
            self.reads.len(),
            self.parked_reads.len(),
            self.queued_upward.len(),
            self.base_in_flight,
            self.outstanding.len(),
            self.reclaim_jobs,
            self.settling.len(),
            self.records.len(),
            self.vulnerable.len(),
            stores.join(" ")
        )
    }

    /// Requests in flight on the base volume (ours plus what the driver reports).
    pub fn base_load(&self) -> u64 {
        self.base_in_flight + self.external_base_load
    }

    /// Load on the base volume from others (a store co-hosted on it).
    pub fn set_external_base_load(&mut self, load: u64) {
        self.external_base_load = load;
    }

    pub fn poll_base(&mut self) -> Option<BaseOp> {
        self.base_out.pop_front()
    }

    pub fn poll_store(&mut self) -> Option<(StoreIdx, u64, Request)> {
        self.store_out.pop_front()
    }

    pub fn poll_upward(&mut self) -> Option<(u64, UpReply)> {
        self.upward_out.pop_front()
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn next_version(&mut self) -> u64 {
        let v = (self.generation << VERSION_BITS) | self.next_counter;
        self.next_counter += 1;
        assert!(
            self.next_counter < 1 << VERSION_BITS,
            "version counter exhausted"
        );
        v
    }

    /// A request left the outstanding set.
    fn settle_outstanding(&mut self, out: &Outstanding) {
        let st = &mut self.stores[out.store];
        st.in_flight -= 1;
        match out.pending {
            Pending::Delete { .. } => st.deletes_in_flight -= 1,
            Pending::ReclaimAny { .. } => st.any_in_flight -= 1,
            _ => {}
        }
    }

    /// When a busy store that stays silent is deemed failed.
    fn silence_deadline(&self, s: StoreIdx) -> Option<Nanos> {
        let st = &self.stores[s];
        let timeout = self.config.request_timeout_ns?;
        (st.in_flight > 0 && !st.removed).then(|| st.last_heard.max(st.busy_since) + timeout)
    }

    fn store_load(&self, s: StoreIdx) -> u64 {
        let st = &self.stores[s];
        st.reported_load.max(st.in_flight)
    }

    fn send(&mut self, store: StoreIdx, request: Request, pending: Pending) {
        let id = self.id();
        let st = &mut self.stores[store];
        if st.in_flight == 0 {
            st.busy_since = self.now;
        }
        st.in_flight += 1;
        match pending {
            Pending::Delete { .. } => st.deletes_in_flight += 1,
            Pending::ReclaimAny { .. } => st.any_in_flight += 1,
            _ => {}
        }
        self.outstanding.insert(id, Outstanding { store, pending });
        self.store_out.push_back((store, id, request));
    }

    fn superblock(&self) -> Superblock {
        Superblock {
            generation: self.generation,
            degraded: self.degraded,
            stores: self
                .stores
                .iter()
                .filter(|s| !s.removed)
                .map(|s| s.info)
                .collect(),
        }
    }

    /// The superblock changed: written now, or once the write in flight completes.
    fn write_superblock(&mut self) {
        self.superblock_dirty = true;
        if self.superblock_in_flight.is_some() {
            return;
        }
        self.superblock_dirty = false;
        self.superblock_in_flight = Some(self.degraded);
        let id = self.id();
        self.base_pending.insert(id, BaseKind::Superblock);
        self.base_out.push_back(BaseOp::Write {
            id,
            offset_bytes: self.config.usable_bytes(),
            data: self.superblock().encode(),
            durable: true,
        });
    }

    fn superblock_written(&mut self) {
        let degraded = self
            .superblock_in_flight
            .take()
            .expect("a superblock write in flight");
        self.degraded_durable = degraded;
        if self.degraded_is_durable() {
            for up_id in std::mem::take(&mut self.held_acks) {
                self.upward_out.push_back((up_id, UpReply::Written));
            }
        }
        if std::mem::take(&mut self.superblock_dirty) {
            self.write_superblock();
        }
    }

    /// The base volume says "degraded" whatever happens to writes in flight.
    fn degraded_is_durable(&self) -> bool {
        self.degraded_durable && self.superblock_in_flight != Some(false)
    }

    /// Some acknowledged data may have fewer than N copies from now on.
    fn set_degraded(&mut self) {
        if !self.degraded {
            self.degraded = true;
            self.write_superblock();
        }
    }

    /// Clears "degraded" once no range in the map has fewer than N copies (the ranges that
    /// had are reclaimed first; checked at most every probe interval: a scan of the map).
    fn pump_degraded(&mut self) {
        if !self.degraded
            || !self.vulnerable.is_empty()
            || !self.held_acks.is_empty()
            || self.now < self.degraded_check_at
        {
            return;
        }
        self.degraded_check_at = self.now + self.config.probe_interval_ns;
        let n = self.config.n_way;
        if self
            .map
            .iter()
            .any(|(_, _, l)| !l.on_base && (l.stores.count_ones() as usize) < n)
        {
            return;
        }
        self.degraded = false;
        self.write_superblock();
    }

    // -----------------------------------------------------------------------------------------
    // Upward requests

    pub fn handle_upward(&mut self, now: Nanos, id: u64, request: Upward) {
        self.now = now;
        let (offset, len) = match &request {
            Upward::Read {
                offset_bytes,
                length_bytes,
            } => (*offset_bytes, *length_bytes),
            Upward::Write {
                offset_bytes, data, ..
            } => (*offset_bytes, data.len() as u64),
        };
        let in_range = len > 0
            && offset
                .checked_add(len)
                .is_some_and(|end| end <= self.config.usable_bytes());
        if !in_range {
            self.upward_out
                .push_back((id, UpReply::Error(ClientError::BadRequest)));
            return;
        }
        match &self.phase {
            Phase::Ready => self.start_upward(id, request),
            Phase::Failed(e) => self
                .upward_out
                .push_back((id, UpReply::Error(ClientError::NoStoreSet(*e)))),
            _ => self.queued_upward.push_back((id, request)),
        }
        self.pump();
    }

    fn start_upward(&mut self, id: u64, request: Upward) {
        match request {
            Upward::Read {
                offset_bytes,
                length_bytes,
            } => {
                let key = self.id();
                self.reads.insert(
                    key,
                    ReadOp {
                        up_id: id,
                        start: offset_bytes,
                        len: length_bytes,
                        buf: Vec::new(),
                        outstanding: 0,
                    },
                );
                self.read_piece(key, offset_bytes, offset_bytes + length_bytes);
            }
            Upward::Write {
                offset_bytes,
                data,
                durable,
            } => self.start_write(id, offset_bytes, data, durable),
        }
    }

    /// Whether a store may hold a copy of some byte of the range that is not deleted for sure:
    /// then a new write there must be off-loaded (invariant 2, extended to copies whose fate is
    /// unknown, e.g. writes that timed out).
    fn blocking_stale(&self, start: u64, end: u64) -> bool {
        // No holder: every copy not deleted for sure stays behind.
        self.older_copies_elsewhere(start, end, u64::MAX, 0)
    }

    /// Whether a copy in `[start, end)` that is not deleted for sure stays behind when
    /// `version` is deleted from `holders`: one on another store, or a newer one.
    fn older_copies_elsewhere(&self, start: u64, end: u64, version: u64, holders: u64) -> bool {
        self.stores.iter().enumerate().any(|(i, s)| {
            !s.stale.is_empty()
                && s.stale.lookup(start, end).iter().any(|p| {
                    p.value.is_some_and(|v| {
                        v.slot.is_none() && (holders & bit(i) == 0 || v.version > version)
                    })
                })
        })
    }

    fn start_write(&mut self, up_id: u64, start: u64, data: Vec<u8>, durable: bool) {
        let end = start + data.len() as u64;
        let must = self.map.overlaps(start, end) || self.blocking_stale(start, end);
        let offload = match self.config.policy {
            Policy::Baseline => must,
            Policy::Always => true,
            Policy::Peak => {
                must || {
                    let base = self.base_load();
                    base > self.config.t_base
                        && self
                            .least_loaded_store()
                            .is_some_and(|(_, load)| load < self.config.t_store && load < base)
                }
            }
        };
        if !offload {
            self.write_base(up_id, start, data, durable);
            return;
        }
        let version = self.next_version();
        // Invariant 2: the new version is above every version off-loaded in the range.
        debug_assert!(self
            .map
            .lookup(start, end)
            .iter()
            .all(|p| p.value.is_none_or(|l| l.version < version)));
        let key = self.id();
        self.writes.insert(
            key,
            WriteOp {
                up_id,
                start,
                data,
                durable,
                version,
                waiting: 0,
                succeeded: 0,
                tried: 0,
                superseded: Vec::new(),
                full_since: None,
            },
        );
        self.place_write(key);
    }

    /// A write of `version` over `[start, end)` is in the range map: off-loaded writes with
    /// older versions still in flight there lose those bytes to it (it may be reclaimed and
    /// leave the map before they complete; deletes owed for it may remove their copies).
    fn supersede(&mut self, start: u64, end: u64, version: u64) {
        for op in self.writes.values_mut() {
            if op.version > version {
                continue;
            }
            let (lo, hi) = (
                op.start.max(start),
                (op.start + op.data.len() as u64).min(end),
            );
            if lo < hi {
                op.superseded.push((lo, hi));
            }
        }
    }

    fn least_loaded_store(&self) -> Option<(StoreIdx, u64)> {
        self.stores
            .iter()
            .enumerate()
            .filter(|(_, s)| s.up && !s.removed)
            .map(|(i, _)| (i, self.store_load(i)))
            .min_by_key(|&(i, load)| (load, i))
    }

    /// Up to `n` available stores on different servers, least loaded first, not in `exclude`.
    fn choose_stores(&self, n: usize, exclude: u64) -> Vec<StoreIdx> {
        let mut candidates: Vec<(u64, StoreIdx)> = self
            .stores
            .iter()
            .enumerate()
            .filter(|(i, s)| s.up && !s.removed && exclude & bit(*i) == 0)
            .map(|(i, _)| (self.store_load(i), i))
            .collect();
        candidates.sort_unstable();
        let mut chosen: Vec<StoreIdx> = Vec::with_capacity(n);
        for (_, i) in candidates {
            if chosen.len() == n {
                break;
            }
            let server = self.stores[i].info.server;
            if chosen.iter().all(|&c| self.stores[c].info.server != server) {
                chosen.push(i);
            }
        }
        chosen
    }

    fn write_base(&mut self, up_id: u64, start: u64, data: Vec<u8>, durable: bool) {
        let id = self.id();
        self.base_pending.insert(id, BaseKind::UpWrite { up_id });
        self.base_in_flight += 1;
        self.stats.base_writes += 1;
        self.base_out.push_back(BaseOp::Write {
            id,
            offset_bytes: start,
            data,
            durable,
        });
    }

    /// Sends an off-loaded write to N stores (fewer if fewer are available). With none: to the
    /// base volume if nothing forces the range to stay off-loaded, else parked until a store
    /// returns.
    fn place_write(&mut self, key: u64) {
        let op = &self.writes[&key];
        let targets = self.choose_stores(self.config.n_way, op.tried);
        if targets.is_empty() {
            let (start, end) = (op.start, op.start + op.data.len() as u64);
            let refused_by_live_stores = op.tried != 0
                && indices(op.tried).all(|i| self.stores[i].up && !self.stores[i].removed);
            let must_offload = self.map.overlaps(start, end) || self.blocking_stale(start, end);
            let now = self.now;
            let full_since = if must_offload && refused_by_live_stores {
                self.stores_full_since.get_or_insert(now);
                *self
                    .writes
                    .get_mut(&key)
                    .expect("write")
                    .full_since
                    .get_or_insert(now)
            } else {
                now
            };
            let waited_enough = now.saturating_sub(full_since) >= self.config.full_timeout_ns;
            if must_offload
                && refused_by_live_stores
                && (self.config.policy == Policy::Always || waited_enough)
            {
                let op = self.writes.remove(&key).expect("write");
                self.stats.refused_writes += 1;
                self.upward_out
                    .push_back((op.up_id, UpReply::Error(ClientError::NoSpace)));
            } else if must_offload {
                self.parked_writes.push(key);
                self.parked_retry_at
                    .get_or_insert(self.now + self.config.probe_interval_ns);
            } else {
                let op = self.writes.remove(&key).expect("write");
                self.write_base(op.up_id, op.start, op.data, op.durable);
            }
            return;
        }
        let (start, version, data) = (op.start, op.version, op.data.clone());
        for &s in &targets {
            let request = Request::Write {
                client: self.config.client,
                volume: self.config.volume,
                offset_bytes: start,
                version,
                data: data.clone(),
            };
            self.send(s, request, Pending::Write { op: key });
        }
        self.writes.get_mut(&key).expect("write").waiting = targets.len() as u32;
    }

    /// One store answered (or failed) a write of an off-loaded op.
    fn write_answered(&mut self, key: u64, store: StoreIdx, outcome: WriteOutcome) {
        let Some(op) = self.writes.get_mut(&key) else {
            return;
        };
        op.waiting -= 1;
        match outcome {
            WriteOutcome::Done => op.succeeded |= bit(store),
            WriteOutcome::NotWritten => op.tried |= bit(store),
            WriteOutcome::Unknown => {
                op.tried |= bit(store);
                let (start, end, version) = (op.start, op.start + op.data.len() as u64, op.version);
                self.add_stale(store, start, end, version);
            }
        }
        let op = &self.writes[&key];
        if op.waiting > 0 {
            return;
        }
        if op.succeeded == 0 {
            // Every copy failed. The retry takes a fresh version, so that deletes owed for the
            // failed attempt (versions at or below the old one) can never touch it; being the
            // newest, it supersedes the writes in flight it overlaps.
            self.retry_write(key);
            return;
        }
        let op = self.writes.remove(&key).expect("write");
        let (start, end) = (op.start, op.start + op.data.len() as u64);
        // The parts a later write superseded are stale on every store that took them.
        let kept: Vec<(u64, u64)> = if op.superseded.is_empty() {
            vec![(start, end)]
        } else {
            let mut kept: RangeMap<()> = RangeMap::new();
            kept.insert(start, end, ());
            for &(lo, hi) in &op.superseded {
                kept.remove(lo, hi);
                for s in indices(op.succeeded) {
                    self.add_stale(s, lo, hi, op.version);
                }
            }
            kept.iter().map(|(lo, hi, _)| (lo, hi)).collect()
        };
        let vulnerable = (op.succeeded.count_ones() as usize) < self.config.n_way;
        if vulnerable {
            // A restart must not go on without the stores holding its copies.
            self.set_degraded();
        }
        for (lo, hi) in kept {
            self.apply_offloaded(lo, hi, op.version, op.succeeded);
            if vulnerable {
                self.vulnerable.push_back((lo, hi));
            }
        }
        self.supersede(start, end, op.version);
        self.stats.offloaded_writes += 1;
        self.stats.offloaded_write_bytes += end - start;
        for s in indices(op.succeeded) {
            self.stores[s].may_hold = true;
            self.stores[s].writes_acked += 1;
            // Deletes held back while this write was in flight (see `delete_refusal`) are
            // looked at again.
            self.stores[s].stale_dirty = true;
        }
        if vulnerable && !self.degraded_is_durable() {
            self.held_acks.push(op.up_id);
        } else {
            self.upward_out.push_back((op.up_id, UpReply::Written));
        }
    }

    /// Records that `[start, end)` now has `version` on `stores`; older copies elsewhere become
    /// stale (deleted later); a newer version already there keeps its place.
    fn apply_offloaded(&mut self, start: u64, end: u64, version: u64, stores: u64) {
        let mut stale: Vec<(StoreIdx, u64, u64, u64)> = Vec::new();
        let mut gained = 0u64;
        self.settle_dirty |= !self.settling.is_empty();
        self.map.update(start, end, |lo, hi, old| match old {
            Some(o) if o.version > version => {
                stale.extend(indices(stores & !o.stores).map(|s| (s, lo, hi, version)));
                Some(*o)
            }
            Some(o) if o.version == version => Some(Loc {
                stores: o.stores | stores,
                ..*o
            }),
            Some(o) => {
                stale.extend(indices(o.stores & !stores).map(|s| (s, lo, hi, o.version)));
                Some(Loc {
                    version,
                    stores,
                    on_base: false,
                })
            }
            None => {
                gained += hi - lo;
                Some(Loc {
                    version,
                    stores,
                    on_base: false,
                })
            }
        });
        self.stats.offloaded_bytes += gained;
        for (s, lo, hi, v) in stale {
            self.add_stale(s, lo, hi, v);
        }
    }

    /// The range map over `[start, end)`, piece by piece (`None`: on the base volume only).
    fn map_pieces(&self, start: u64, end: u64) -> Vec<(u64, u64, Option<Loc>)> {
        self.map
            .lookup(start, end)
            .into_iter()
            .map(|p| (p.start, p.end, p.value.copied()))
            .collect()
    }

    /// Resolves `[start, end)` of a read by the range map: base pieces, store pieces (least
    /// loaded replica), parked pieces (no replica available).
    fn read_piece(&mut self, read: u64, start: u64, end: u64) {
        let pieces: Vec<(u64, u64, Option<Loc>)> = self.map_pieces(start, end);
        for (lo, hi, loc) in pieces {
            match loc {
                None | Some(Loc { on_base: true, .. }) => {
                    let id = self.id();
                    self.base_pending
                        .insert(id, BaseKind::UpRead { read, start: lo });
                    self.base_in_flight += 1;
                    self.stats.base_reads += 1;
                    self.base_out.push_back(BaseOp::Read {
                        id,
                        offset_bytes: lo,
                        length_bytes: hi - lo,
                    });
                }
                Some(l) => {
                    let replica = indices(l.stores)
                        .filter(|&s| self.stores[s].up && !self.stores[s].removed)
                        .min_by_key(|&s| (self.store_load(s), s));
                    match replica {
                        Some(s) => {
                            self.stats.store_reads += 1;
                            let request = Request::Read {
                                client: self.config.client,
                                offset_bytes: lo,
                                length_bytes: hi - lo,
                            };
                            self.send(
                                s,
                                request,
                                Pending::Read {
                                    read,
                                    start: lo,
                                    end: hi,
                                    version: l.version,
                                },
                            );
                        }
                        None => self.parked_reads.push((read, lo, hi)),
                    }
                }
            }
            self.reads.get_mut(&read).expect("read").outstanding += 1;
        }
    }

    /// Bytes of a read arrived, `data[skip..skip + len]` for `[start, start + len)`: `data`
    /// becomes the read's buffer when it is exactly the whole read (no copy), else the bytes
    /// are copied into the buffer at their place (a larger `data` is not kept alive).
    fn read_piece_done(&mut self, read: u64, start: u64, data: Vec<u8>, skip: usize, len: usize) {
        let op = self.reads.get_mut(&read).expect("read");
        if op.buf.is_empty()
            && start == op.start
            && skip == 0
            && len as u64 == op.len
            && data.len() == len
        {
            op.buf = data;
            return;
        }
        if op.buf.is_empty() {
            op.buf = vec![0; op.len as usize];
        }
        let at = (start - op.start) as usize;
        op.buf[at..at + len].copy_from_slice(&data[skip..skip + len]);
    }

    fn read_piece_finished(&mut self, read: u64) {
        let op = self.reads.get_mut(&read).expect("read");
        op.outstanding -= 1;
        if op.outstanding == 0 {
            let mut op = self.reads.remove(&read).expect("read");
            debug_assert_eq!(
                op.buf.len() as u64,
                op.len,
                "every byte of a read is a piece's"
            );
            op.buf.resize(op.len as usize, 0);
            self.upward_out.push_back((op.up_id, UpReply::Read(op.buf)));
        }
    }

    // -----------------------------------------------------------------------------------------
    // Base completions

    pub fn handle_base(&mut self, now: Nanos, done: BaseDone) {
        self.now = now;
        let id = match &done {
            BaseDone::Read { id, .. } | BaseDone::Written { id } => *id,
        };
        let Some(kind) = self.base_pending.remove(&id) else {
            return;
        };
        match (kind, done) {
            (BaseKind::UpWrite { up_id }, _) => {
                self.base_in_flight -= 1;
                self.upward_out.push_back((up_id, UpReply::Written));
            }
            (BaseKind::UpRead { read, start }, BaseDone::Read { data, .. }) => {
                self.base_in_flight -= 1;
                let len = data.len();
                self.read_piece_done(read, start, data, 0, len);
                self.read_piece_finished(read);
            }
            (BaseKind::Reclaim { job }, _) => {
                self.base_in_flight -= 1;
                self.reclaim_written(job);
            }
            (BaseKind::Superblock, BaseDone::Read { data, .. }) => self.superblock_read(&data),
            (BaseKind::Superblock, BaseDone::Written { .. }) => {
                self.superblock_written();
                match &mut self.phase {
                    Phase::Formatting => self.become_ready(),
                    Phase::Fetching(f) => {
                        f.superblock_written = true;
                        self.maybe_finish_fetch();
                    }
                    _ => {}
                }
            }
            (BaseKind::UpRead { .. }, BaseDone::Written { .. }) => {
                unreachable!("a read completed as a write")
            }
        }
        self.pump();
    }

    fn become_ready(&mut self) {
        self.phase = Phase::Ready;
        while let Some((id, request)) = self.queued_upward.pop_front() {
            self.start_upward(id, request);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Store replies and failures

    /// A store answered request `id`; `load` is the load it piggy-backed (requests in flight
    /// on its volume), if any.
    pub fn handle_store(
        &mut self,
        now: Nanos,
        store: StoreIdx,
        id: u64,
        reply: Reply,
        load: Option<u64>,
    ) {
        self.now = now;
        if store >= self.stores.len() {
            return;
        }
        if let Some(load) = load {
            self.stores[store].reported_load = load;
        }
        self.stores[store].last_heard = now;
        let Some(out) = self.outstanding.remove(&id) else {
            return; // Late: the request was already given up.
        };
        if out.store != store {
            self.outstanding.insert(id, out);
            return;
        }
        self.settle_outstanding(&out);
        if matches!(
            reply,
            Reply::Error(StoreError::Recovering) | Reply::Error(StoreError::NoStore)
        ) {
            // Nothing was done: fail this request and the store with it.
            self.request_failed(store, out.pending, false);
            self.store_failed(store);
        } else {
            if !self.stores[store].up && !self.stores[store].removed {
                self.store_recovered(store);
            }
            self.store_replied(store, out.pending, reply);
        }
        self.pump();
    }

    /// The connection to a store broke (the store restarted, or the network failed): every
    /// request outstanding there may or may not have been carried out, and the store counts as
    /// failed until a probe gets an answer.
    pub fn connection_lost(&mut self, now: Nanos, store: StoreIdx) {
        self.now = now;
        if store >= self.stores.len() {
            return;
        }
        if matches!(self.phase, Phase::Ready) && self.stores[store].up {
            self.store_failed(store);
        } else {
            self.fail_outstanding(store);
        }
        self.pump();
    }

    /// A periodic load broadcast from a store.
    pub fn handle_load(&mut self, store: StoreIdx, load: u64) {
        if let Some(s) = self.stores.get_mut(store) {
            s.reported_load = load;
        }
    }

    fn store_replied(&mut self, store: StoreIdx, pending: Pending, reply: Reply) {
        match pending {
            Pending::Write { op } => {
                let outcome = match reply {
                    Reply::Done => {
                        // A store took a write: the stores are not full (any more).
                        self.stores_full_since = None;
                        WriteOutcome::Done
                    }
                    _ => WriteOutcome::NotWritten,
                };
                self.write_answered(op, store, outcome);
            }
            Pending::Read {
                read,
                start,
                end,
                version,
            } => {
                let mut covered = start;
                let mut gaps = Vec::new();
                if let Reply::Read(pieces) = reply {
                    for (e, data) in pieces {
                        let lo = e.offset_bytes.max(start);
                        let hi = (e.offset_bytes + e.length_bytes).min(end);
                        if lo >= hi || data.len() as u64 != e.length_bytes {
                            continue;
                        }
                        if lo > covered {
                            gaps.push((covered, lo));
                        }
                        covered = hi;
                        if e.version < version {
                            // Older than the copy acknowledged there: the store lost it.
                            gaps.push((lo, hi));
                            continue;
                        }
                        // The version read, or a newer one being written (concurrent).
                        let skip = (lo - e.offset_bytes) as usize;
                        self.read_piece_done(read, lo, data, skip, (hi - lo) as usize);
                    }
                }
                if covered < end {
                    gaps.push((covered, end));
                }
                // Gaps: the copy was deleted meanwhile (reclaimed), or the store lost it (its
                // log was damaged); resolve them again, elsewhere in the second case.
                for (lo, hi) in gaps {
                    if lo < hi {
                        self.copy_lost(store, lo, hi, version);
                        self.read_piece(read, lo, hi);
                    }
                }
                self.read_piece_finished(read);
            }
            Pending::ReclaimAny { writes_acked } => {
                match reply {
                    Reply::ReadAny(Some((extent, data))) => {
                        let useful = self.reclaim_got(store, vec![(extent, data)]);
                        let n_reclaim = self.config.n_reclaim as u64;
                        let st = &mut self.stores[store];
                        if useful {
                            st.any_window = (st.any_window * 2).min(n_reclaim.max(1));
                        } else {
                            st.any_window = 1;
                            st.reclaim_after = self.now + self.config.probe_interval_ns;
                        }
                        return;
                    }
                    Reply::ReadAny(None) if self.stores[store].writes_acked == writes_acked => {
                        self.stores[store].may_hold = false;
                        self.stores[store].any_window = 1;
                    }
                    _ => self.stores[store].any_window = 1,
                }
                self.reclaim_jobs -= 1;
            }
            Pending::ReclaimRead => match reply {
                Reply::Read(pieces) => {
                    self.reclaim_got(store, pieces);
                }
                _ => self.reclaim_jobs -= 1,
            },
            Pending::Delete {
                start,
                end,
                version,
            } => {
                let ok = reply == Reply::Done;
                self.stores[store]
                    .stale
                    .update(start, end, |_, _, old| match old {
                        Some(v) if ok && v.version <= version => None,
                        Some(v) => Some(Stale { sent: false, ..*v }),
                        None => None,
                    });
                // A settling reclaim may have waited for this delete.
                self.settle_dirty = true;
                if !ok {
                    self.stores[store].stale_dirty = true;
                } else {
                    // Deletes of current copies on other stores may have waited for this older
                    // copy to go (invariant 3): look at them again.
                    for (i, st) in self.stores.iter_mut().enumerate() {
                        if i != store
                            && !st.stale.is_empty()
                            && st
                                .stale
                                .lookup(start, end)
                                .iter()
                                .any(|p| p.value.is_some_and(|v| !v.sent))
                        {
                            st.stale_dirty = true;
                        }
                    }
                }
                self.maybe_collect_records(store);
            }
            Pending::RecordWrite { slot } => {
                let outcome = match reply {
                    Reply::Done => WriteOutcome::Done,
                    _ => WriteOutcome::NotWritten,
                };
                self.record_written(store, slot, outcome);
            }
            Pending::RecordGc { slot } => {
                if let Some(r) = self.records.get_mut(&slot) {
                    r.collecting &= !bit(store);
                    if reply == Reply::Done {
                        r.holders &= !bit(store);
                    }
                    if r.holders == 0 {
                        self.records.remove(&slot);
                        self.settle_dirty = true;
                        self.stats.deletion_records_collected += 1;
                    }
                }
            }
            Pending::Metadata => {
                if let (Phase::Fetching(f), Reply::Metadata(extents)) = (&mut self.phase, reply) {
                    f.metadata[store] = Some(extents);
                    self.maybe_finish_fetch();
                }
            }
            Pending::RecordsMeta => {
                if let (Phase::Fetching(_), Reply::Metadata(extents)) = (&self.phase, reply) {
                    // Metadata is answered once every earlier write is durable, so the records
                    // listed include those the previous incarnation was still writing.
                    let end = extents
                        .iter()
                        .map(|e| e.offset_bytes + e.length_bytes)
                        .max();
                    match end {
                        None => {
                            if let Phase::Fetching(f) = &mut self.phase {
                                f.records[store] = Some(Vec::new());
                            }
                            self.maybe_finish_fetch();
                        }
                        Some(end) => self.send(
                            store,
                            Request::Read {
                                client: companion(self.config.client),
                                offset_bytes: 0,
                                length_bytes: end,
                            },
                            Pending::Records,
                        ),
                    }
                }
            }
            Pending::Records => {
                if let (Phase::Fetching(f), Reply::Read(pieces)) = (&mut self.phase, reply) {
                    f.records[store] = Some(pieces);
                    self.maybe_finish_fetch();
                }
            }
            Pending::Probe => self.stores[store].probing = false,
            Pending::ClearRecords => {
                let st = &mut self.stores[store];
                st.old_records = if reply == Reply::Done {
                    None
                } else {
                    st.old_records.map(|(v, _)| (v, false))
                };
            }
        }
    }

    /// A request that got no answer (`unknown`: it may or may not have been carried out) or a
    /// refusal.
    fn request_failed(&mut self, store: StoreIdx, pending: Pending, unknown: bool) {
        match pending {
            Pending::Write { op } => {
                let outcome = if unknown {
                    WriteOutcome::Unknown
                } else {
                    WriteOutcome::NotWritten
                };
                self.write_answered(op, store, outcome);
            }
            Pending::Read {
                read, start, end, ..
            } => {
                self.read_piece(read, start, end);
                self.read_piece_finished(read);
            }
            Pending::ReclaimAny { .. } | Pending::ReclaimRead => self.reclaim_jobs -= 1,
            Pending::Delete { start, end, .. } => {
                self.stores[store].stale.update(start, end, |_, _, old| {
                    old.map(|v| Stale { sent: false, ..*v })
                });
                self.stores[store].stale_dirty = true;
            }
            Pending::RecordWrite { slot } => {
                let outcome = if unknown {
                    WriteOutcome::Unknown
                } else {
                    WriteOutcome::NotWritten
                };
                self.record_written(store, slot, outcome);
            }
            Pending::RecordGc { slot } => {
                if let Some(r) = self.records.get_mut(&slot) {
                    r.collecting &= !bit(store);
                }
            }
            Pending::Metadata | Pending::RecordsMeta | Pending::Records => {
                if let Phase::Fetching(f) = &mut self.phase {
                    f.retry_at[store] = Some(self.now + self.config.probe_interval_ns);
                    f.failed[store] = true;
                }
                self.maybe_finish_fetch();
            }
            Pending::Probe => self.stores[store].probing = false,
            Pending::ClearRecords => {
                if let Some((_, sent)) = self.stores[store].old_records.as_mut() {
                    *sent = false;
                }
            }
        }
    }

    /// A read found no copy of `version` in `[start, end)` on `store`, where the range map still
    /// says one is: the store lost it (a damaged log). Its other copies become the only ones
    /// (re-protected first, as after a store failure); without another copy the bytes are lost
    /// (counted in [`Stats::lost_bytes`]) and the base volume's older contents are what remain.
    fn copy_lost(&mut self, store: StoreIdx, start: u64, end: u64, version: u64) {
        let (mut lost, mut dropped, mut vulnerable) = (0, 0, Vec::new());
        self.map.update(start, end, |lo, hi, old| {
            let o = old?;
            if o.version != version || o.on_base || o.stores & bit(store) == 0 {
                return Some(*o);
            }
            let stores = o.stores & !bit(store);
            if stores == 0 {
                lost += hi - lo;
                dropped += hi - lo;
                None
            } else {
                vulnerable.push((lo, hi));
                Some(Loc { stores, ..*o })
            }
        });
        if lost + vulnerable.len() as u64 == 0 {
            return;
        }
        self.stats.lost_bytes += lost;
        self.stats.offloaded_bytes -= dropped;
        self.stats.lost_copies += 1;
        if !vulnerable.is_empty() {
            self.set_degraded();
        }
        self.vulnerable.extend(vulnerable);
        self.settle_dirty = true;
    }

    /// Marks a store failed: its outstanding requests fail, its data becomes vulnerable (and is
    /// reclaimed first), deletes owed to it are recorded on other stores.
    fn store_failed(&mut self, store: StoreIdx) {
        let st = &mut self.stores[store];
        if !st.up {
            return;
        }
        st.up = false;
        st.down_since = self.now;
        st.next_probe = self.now + self.config.probe_interval_ns;
        st.stale_dirty = true;
        self.stats.store_failures += 1;
        self.fail_outstanding(store);
        let st = &mut self.stores[store];
        st.stale.update(0, u64::MAX, |_, _, old| {
            old.map(|v| Stale { sent: false, ..*v })
        });
        let vulnerable: Vec<(u64, u64)> = self
            .map
            .iter()
            .filter(|(_, _, l)| !l.on_base && l.stores & bit(store) != 0)
            .map(|(s, e, _)| (s, e))
            .collect();
        self.vulnerable.extend(vulnerable);
    }

    /// Every request outstanding at a store fails with an unknown outcome.
    fn fail_outstanding(&mut self, store: StoreIdx) {
        let ids: Vec<u64> = self
            .outstanding
            .iter()
            .filter(|(_, o)| o.store == store)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            let out = self.outstanding.remove(&id).expect("outstanding");
            self.settle_outstanding(&out);
            self.request_failed(store, out.pending, true);
        }
    }

    fn store_recovered(&mut self, store: StoreIdx) {
        let st = &mut self.stores[store];
        st.up = true;
        st.may_hold = true;
        st.stale_dirty = true;
        let parked_reads = std::mem::take(&mut self.parked_reads);
        for (read, lo, hi) in parked_reads {
            self.read_piece(read, lo, hi);
            self.read_piece_finished(read);
        }
        self.retry_parked_writes();
    }

    fn retry_parked_writes(&mut self) {
        self.parked_retry_at = None;
        let parked_writes = std::mem::take(&mut self.parked_writes);
        for key in parked_writes {
            if let Some(op) = self.writes.get_mut(&key) {
                op.tried = 0;
            }
            self.retry_write(key);
        }
    }

    /// Sends a write again under a fresh version: the newest now, nothing completed before
    /// supersedes it.
    fn retry_write(&mut self, key: u64) {
        let version = self.next_version();
        let Some(op) = self.writes.get_mut(&key) else {
            return;
        };
        op.version = version;
        op.superseded.clear();
        self.place_write(key);
    }

    /// Removes a store from the store set (decommissioned, or down for too long). Off-loaded
    /// data whose only copies were there is lost (counted in [`Stats::lost_bytes`]).
    pub fn remove_store(&mut self, now: Nanos, store: StoreIdx) {
        self.now = now;
        if store >= self.stores.len() || self.stores[store].removed {
            return;
        }
        self.fail_outstanding(store);
        let st = &mut self.stores[store];
        st.removed = true;
        st.up = false;
        st.stale = RangeMap::new();
        self.settle_dirty = true;
        let mut lost = 0;
        let mut removed_bytes = 0;
        self.map.update(0, u64::MAX, |lo, hi, old| {
            let o = old?;
            if o.stores & bit(store) == 0 {
                return Some(*o);
            }
            let stores = o.stores & !bit(store);
            if stores == 0 {
                removed_bytes += hi - lo;
                if !o.on_base {
                    lost += hi - lo;
                }
                None
            } else {
                Some(Loc { stores, ..*o })
            }
        });
        self.stats.lost_bytes += lost;
        self.stats.offloaded_bytes -= removed_bytes;
        for r in self.records.values_mut() {
            if r.target == store {
                r.collect = true;
            }
            r.holders &= !bit(store);
        }
        self.records.retain(|_, r| r.holders != 0 || r.writing != 0);
        // Writes waiting for this store try others.
        for op in self.writes.values_mut() {
            op.tried |= bit(store);
        }
        if let Phase::Fetching(f) = &mut self.phase {
            f.metadata[store] = Some(Vec::new());
            f.records[store] = Some(Vec::new());
            f.retry_at[store] = None;
            self.maybe_finish_fetch();
        }
        self.write_superblock();
        self.pump();
    }

    // -----------------------------------------------------------------------------------------
    // Timeouts

    pub fn poll_timeout(&self) -> Option<Nanos> {
        let mut at: Option<Nanos> = None;
        let mut consider = |t: Nanos| at = Some(at.map_or(t, |a| a.min(t)));
        for s in 0..self.stores.len() {
            if let Some(t) = self.silence_deadline(s) {
                consider(t);
            }
        }
        for s in &self.stores {
            if !s.up && !s.removed {
                if !s.probing && matches!(self.phase, Phase::Ready) {
                    consider(s.next_probe);
                }
                if let Some(after) = self.config.remove_after_ns {
                    consider(s.down_since + after);
                }
            }
        }
        if let Phase::Fetching(f) = &self.phase {
            for t in f.retry_at.iter().flatten() {
                consider(*t);
            }
            // Past it, failed fetches (retried every probe interval) decide.
            let graced = f.started + self.config.recovery_grace_ns;
            if graced > self.now && f.failed.iter().any(|&x| x) {
                consider(graced);
            }
        }
        if let Some(t) = self.parked_retry_at {
            consider(t);
        }
        if self.degraded
            && self.vulnerable.is_empty()
            && self.held_acks.is_empty()
            && self.is_ready()
        {
            consider(self.degraded_check_at);
        }
        if self.config.policy == Policy::Peak && self.is_ready() {
            for s in &self.stores {
                if s.up && s.may_hold && s.reclaim_after > self.now {
                    consider(s.reclaim_after);
                }
            }
        }
        for s in &self.stores {
            if !s.up && !s.removed && s.record_after > self.now && !s.stale.is_empty() {
                consider(s.record_after);
            }
        }
        at
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        self.now = now;
        if self.parked_retry_at.is_some_and(|t| t <= now) {
            self.retry_parked_writes();
        }
        for store in 0..self.stores.len() {
            if self.silence_deadline(store).is_none_or(|t| t > now) {
                continue;
            }
            if matches!(self.phase, Phase::Ready) && self.stores[store].up {
                self.store_failed(store);
            } else {
                // Not serving (down, or the client is recovering): give up what is outstanding.
                self.fail_outstanding(store);
            }
        }
        for s in 0..self.stores.len() {
            let st = &self.stores[s];
            if st.up || st.removed {
                continue;
            }
            if let Some(after) = self.config.remove_after_ns {
                if now >= st.down_since + after {
                    self.remove_store(now, s);
                    continue;
                }
            }
            let st = &mut self.stores[s];
            if matches!(self.phase, Phase::Ready) && !st.probing && now >= st.next_probe {
                st.probing = true;
                st.next_probe = now + self.config.probe_interval_ns;
                self.send(
                    s,
                    Request::Read {
                        client: PROBE_CLIENT,
                        offset_bytes: 0,
                        length_bytes: 1,
                    },
                    Pending::Probe,
                );
            }
        }
        if let Phase::Fetching(f) = &mut self.phase {
            let due: Vec<StoreIdx> = (0..f.retry_at.len())
                .filter(|&s| f.retry_at[s].is_some_and(|t| t <= now))
                .collect();
            for s in due {
                if let Phase::Fetching(f) = &mut self.phase {
                    f.retry_at[s] = None;
                }
                self.fetch_from(s);
            }
            self.maybe_finish_fetch();
        }
        self.pump();
    }

    // -----------------------------------------------------------------------------------------
    // Stale copies and deletion records

    fn add_stale(&mut self, store: StoreIdx, start: u64, end: u64, version: u64) {
        let st = &mut self.stores[store];
        if st.removed {
            return;
        }
        st.stale.update(start, end, |_, _, old| {
            Some(match old {
                Some(v) if v.version >= version => *v,
                _ => Stale {
                    version,
                    sent: false,
                    recording: false,
                    slot: None,
                },
            })
        });
        st.stale_dirty = true;
    }

    /// Sends the deletes owed to available stores; writes deletion records for failed ones.
    fn pump_stale(&mut self) {
        for s in 0..self.stores.len() {
            if !self.stores[s].stale_dirty || self.stores[s].removed {
                continue;
            }
            self.stores[s].stale_dirty = false;
            if self.stores[s].up {
                let todo: Vec<(u64, u64, u64)> = self.stores[s]
                    .stale
                    .iter()
                    .filter(|(_, _, v)| !v.sent)
                    .map(|(lo, hi, v)| (lo, hi, v.version))
                    .filter(|&(lo, hi, v)| self.delete_allowed(s, lo, hi, v))
                    .collect();
                for (lo, hi, version) in todo {
                    if self.stores[s].deletes_in_flight >= DELETES_IN_FLIGHT_MAX {
                        self.stores[s].stale_dirty = true;
                        break;
                    }
                    self.check_delete_allowed(s, lo, hi, version);
                    self.stores[s]
                        .stale
                        .update(lo, hi, |_, _, old| old.map(|v| Stale { sent: true, ..*v }));
                    self.stats.deletes_sent += 1;
                    let request = Request::Delete {
                        client: self.config.client,
                        volume: self.config.volume,
                        offset_bytes: lo,
                        length_bytes: hi - lo,
                        version,
                    };
                    self.send(
                        s,
                        request,
                        Pending::Delete {
                            start: lo,
                            end: hi,
                            version,
                        },
                    );
                }
            } else {
                self.record_deletions(s);
            }
        }
        self.pump_record_gc();
    }

    /// A store missed at a recovery is back: the deletion records it holds from earlier lives
    /// go. Each is a copy: a record is relied on only once durable on N stores, so another copy
    /// was read from a store that answered (at most N-1 were missed).
    fn pump_old_records(&mut self) {
        for s in 0..self.stores.len() {
            let st = &self.stores[s];
            let Some((version, false)) = st.old_records else {
                continue;
            };
            if !st.up || st.removed {
                continue;
            }
            self.stores[s].old_records = Some((version, true));
            let request = Request::Delete {
                client: companion(self.config.client),
                volume: self.config.volume,
                offset_bytes: 0,
                length_bytes: 1 << 62,
                version,
            };
            self.send(s, request, Pending::ClearRecords);
        }
    }

    /// Whether a delete of versions up to `version` over `[start, end)` may go to `store` (or
    /// be recorded for it while it is down): a delete removes every copy at or below its
    /// version, so where the store holds the current copy at or below it, that copy goes too.
    ///
    /// - Invariant 1: the current copy is removed only once it is on the base volume (a copy
    ///   whose write failed with an unknown outcome, over a current older copy on the same
    ///   store, waits for the current copy's reclaim). A copy that a write still in flight
    ///   counts on (the store acknowledged it) is current in the same sense before the write
    ///   reaches the map.
    /// - Invariant 3: the current copy is removed only once no older copy that is not deleted
    ///   for sure remains on a store that does not hold the current version — otherwise a
    ///   restart would find that older copy as the latest and reclaim it over newer data.
    ///   (On a holder, deleting the current copy deletes its older copies too.)
    fn delete_allowed(&self, store: StoreIdx, start: u64, end: u64, version: u64) -> bool {
        self.delete_refusal(store, start, end, version).is_none()
    }

    /// Why a delete may not go yet (see [`Client::delete_allowed`]), or `None`.
    fn delete_refusal(
        &self,
        store: StoreIdx,
        start: u64,
        end: u64,
        version: u64,
    ) -> Option<&'static str> {
        // A write still in flight counts on the copies stores have acknowledged; it is not in
        // the map yet, so its copies are looked at here.
        if self.writes.values().any(|op| {
            op.succeeded & bit(store) != 0
                && op.version <= version
                && op.start < end
                && start < op.start + op.data.len() as u64
        }) {
            return Some(
                "invariant 1: it removes a copy that a write in flight counts on (acknowledged by the store, not yet in the map)",
            );
        }
        for p in self.map.lookup(start, end) {
            let Some(l) = p.value else { continue };
            if l.stores & bit(store) == 0 || l.version > version {
                continue;
            }
            if !l.on_base {
                return Some("invariant 1: it removes a current copy not yet on the base volume");
            }
            if self.older_copies_elsewhere(p.start, p.end, u64::MAX, l.stores) {
                return Some(
                    "invariant 3: it removes the current copy while an older copy remains on a store that does not hold it",
                );
            }
        }
        None
    }

    fn check_delete_allowed(&self, store: StoreIdx, start: u64, end: u64, version: u64) {
        if let Some(why) = self.delete_refusal(store, start, end, version) {
            panic!(
                "{why}: deleting versions up to {version} of [{start}, {end}) from store {store}; map {:?}",
                self.map.lookup(start, end)
            );
        }
    }

    /// Writes a deletion record of the unrecorded stale copies on a failed store to N other
    /// stores.
    fn record_deletions(&mut self, target: StoreIdx) {
        let entries: Vec<(u64, u64, u64)> = self.stores[target]
            .stale
            .iter()
            .filter(|(_, _, v)| v.slot.is_none() && !v.recording)
            .map(|(lo, hi, v)| (lo, hi, v.version))
            .filter(|&(lo, hi, v)| self.delete_allowed(target, lo, hi, v))
            .take(ENTRIES_MAX)
            .collect();
        if entries.is_empty() {
            return;
        }
        for &(lo, hi, v) in &entries {
            // A durable deletion record counts as the delete itself at recovery.
            self.check_delete_allowed(target, lo, hi, v);
        }
        if self.stores[target].record_after > self.now {
            self.stores[target].stale_dirty = true;
            return;
        }
        let holders = self.choose_stores(self.config.n_way, bit(target));
        if holders.len() < self.config.n_way {
            // Not enough stores to hold it: the copies stay blocking until the store returns
            // or more stores are up.
            self.stores[target].stale_dirty = true;
            return;
        }
        for &(lo, hi, _) in &entries {
            self.stores[target].stale.update(lo, hi, |_, _, old| {
                old.map(|v| Stale {
                    recording: true,
                    ..*v
                })
            });
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        let version = self.next_version();
        let payload = DeletionRecord {
            target: self.stores[target].info.id,
            entries: entries.clone(),
        }
        .encode();
        let mut mask = 0;
        for &h in &holders {
            mask |= bit(h);
            let request = Request::Write {
                client: companion(self.config.client),
                volume: self.config.volume,
                offset_bytes: slot << SLOT_SHIFT,
                version,
                data: payload.clone(),
            };
            self.send(h, request, Pending::RecordWrite { slot });
        }
        self.records.insert(
            slot,
            DelRecordInfo {
                target,
                version,
                bytes: payload.len() as u64,
                holders: 0,
                writing: mask,
                entries,
                collecting: 0,
                collect: false,
            },
        );
        self.stats.deletion_records_written += 1;
        // More entries than fit in one record: the rest go in the next.
        self.stores[target].stale_dirty = true;
    }

    fn record_written(&mut self, store: StoreIdx, slot: u64, outcome: WriteOutcome) {
        let Some(r) = self.records.get_mut(&slot) else {
            return;
        };
        r.writing &= !bit(store);
        match outcome {
            WriteOutcome::Done => r.holders |= bit(store),
            // One holder failed: the record is not durable on N stores. Its entries are
            // recorded again; this record is collected, also from a store that may hold it.
            WriteOutcome::Unknown => {
                r.holders |= bit(store);
                r.collect = true;
            }
            WriteOutcome::NotWritten => r.collect = true,
        }
        if r.writing != 0 {
            return;
        }
        let (target, entries, failed) = (r.target, r.entries.clone(), r.collect);
        let st = &mut self.stores[target];
        if failed {
            st.record_after = self.now + self.config.probe_interval_ns;
        }
        for (lo, hi, version) in entries {
            st.stale.update(lo, hi, |_, _, old| {
                old.map(|v| {
                    if !failed && v.version <= version {
                        Stale {
                            recording: false,
                            slot: Some(slot),
                            ..*v
                        }
                    } else {
                        Stale {
                            recording: false,
                            ..*v
                        }
                    }
                })
            });
        }
        st.stale_dirty = true;
        if !failed {
            // Recorded copies no longer hold back deletes on other stores (invariant 3).
            for st in &mut self.stores {
                if !st.stale.is_empty() {
                    st.stale_dirty = true;
                }
            }
        }
        self.maybe_collect_records(target);
    }

    /// Once no stale copy on `target` needs a record any more, its records are deleted.
    fn maybe_collect_records(&mut self, target: StoreIdx) {
        if !self
            .records
            .values()
            .any(|r| r.target == target && !r.collect)
        {
            return;
        }
        let st = &self.stores[target];
        // While a stale copy there is not recorded, the records of older copies it replaced
        // (or, after a recovery without the store, of copies it may still hold) stay: a restart
        // would otherwise find those copies unrecorded, with the newer ones they hid gone.
        if st.stale.iter().any(|(_, _, v)| v.slot.is_none()) {
            return;
        }
        let needed: Vec<u64> = st.stale.iter().filter_map(|(_, _, v)| v.slot).collect();
        for (slot, r) in self.records.iter_mut() {
            if r.target == target && r.writing == 0 && !needed.contains(slot) {
                r.collect = true;
            }
        }
    }

    fn pump_record_gc(&mut self) {
        let todo: Vec<(u64, StoreIdx)> = self
            .records
            .iter()
            .filter(|(_, r)| r.collect && r.writing == 0)
            .flat_map(|(&slot, r)| indices(r.holders & !r.collecting).map(move |h| (slot, h)))
            .filter(|&(_, h)| self.stores[h].up)
            .collect();
        for (slot, h) in todo {
            let (len, version) = (self.records[&slot].bytes, self.records[&slot].version);
            self.records.get_mut(&slot).expect("record").collecting |= bit(h);
            let request = Request::Delete {
                client: companion(self.config.client),
                volume: self.config.volume,
                offset_bytes: slot << SLOT_SHIFT,
                length_bytes: len,
                version,
            };
            self.send(h, request, Pending::RecordGc { slot });
        }
        let empty: Vec<u64> = self
            .records
            .iter()
            .filter(|(_, r)| r.collect && r.holders == 0 && r.writing == 0)
            .map(|(&s, _)| s)
            .collect();
        for slot in empty {
            self.records.remove(&slot);
            self.settle_dirty = true;
            self.stats.deletion_records_collected += 1;
        }
    }

    // -----------------------------------------------------------------------------------------
    // Reclaim

    fn pump_reclaim(&mut self) {
        if self.config.policy != Policy::Peak || !self.is_ready() {
            return;
        }
        // Full stores are reclaimed under load too: waiting for a quiet base volume would
        // stall every write that must be off-loaded.
        while self.reclaim_jobs < self.config.n_reclaim
            && (self.base_load() < self.config.t_base || self.stores_full_since.is_some())
        {
            // Vulnerable data (fewer than N copies available) first.
            if let Some((lo, hi)) = self.vulnerable.pop_front() {
                let pieces: Vec<(u64, u64, Loc)> = self
                    .map
                    .lookup(lo, hi)
                    .into_iter()
                    .filter_map(|p| p.value.map(|l| (p.start, p.end, *l)))
                    .filter(|(_, _, l)| !l.on_base)
                    .collect();
                for (plo, phi, l) in pieces {
                    let replica = indices(l.stores)
                        .filter(|&s| self.stores[s].up)
                        .min_by_key(|&s| (self.store_load(s), s));
                    if let Some(s) = replica {
                        self.reclaim_jobs += 1;
                        self.stats.reclaim_reads += 1;
                        let request = Request::Read {
                            client: self.config.client,
                            offset_bytes: plo,
                            length_bytes: phi - plo,
                        };
                        self.send(s, request, Pending::ReclaimRead);
                    }
                }
                continue;
            }
            let n = self.stores.len();
            let pick = (0..n)
                .map(|k| (self.next_reclaim_store + k) % n)
                .find(|&s| {
                    let st = &self.stores[s];
                    st.up
                        && st.may_hold
                        && st.reclaim_after <= self.now
                        && st.any_in_flight < st.any_window
                });
            let Some(s) = pick else {
                break;
            };
            self.next_reclaim_store = (s + 1) % n;
            self.reclaim_jobs += 1;
            self.stats.reclaim_reads += 1;
            let writes_acked = self.stores[s].writes_acked;
            self.send(
                s,
                Request::ReadAny {
                    client: self.config.client,
                },
                Pending::ReclaimAny { writes_acked },
            );
        }
    }

    /// Data read back for reclaim: the parts that are still the latest version are written to
    /// the base volume; the others are stale on this store and deleted. Returns whether any
    /// of it needed work (false: all of it is being settled or written already).
    fn reclaim_got(&mut self, store: StoreIdx, pieces: Vec<(Extent, Vec<u8>)>) -> bool {
        let mut useful = false;
        let mut runs: Vec<(u64, u64, u64, Vec<u8>)> = Vec::new();
        for (e, data) in pieces {
            let (lo, hi, v) = (e.offset_bytes, e.offset_bytes + e.length_bytes, e.version);
            if data.len() as u64 != e.length_bytes {
                continue;
            }
            if self.writes.values().any(|op| op.version == v) {
                // A write of ours still waiting for its other copies: the store answered it
                // already, the range map learns of it only once every copy is in. Neither
                // reclaimed nor stale yet; read_any offers it again later.
                continue;
            }
            let parts: Vec<(u64, u64, Option<Loc>)> = self.map_pieces(lo, hi);
            for (plo, phi, loc) in parts {
                match loc {
                    Some(l) if l.version == v && l.stores & bit(store) != 0 => {
                        if l.on_base || self.reclaiming.overlaps(plo, phi) {
                            // Another reclaim got here first, or an older version's reclaim
                            // write is still in flight there.
                            continue;
                        }
                        let bytes = &data[(plo - lo) as usize..(phi - lo) as usize];
                        match runs.last_mut() {
                            Some(run) if run.1 == plo && run.2 == v => {
                                run.1 = phi;
                                run.3.extend_from_slice(bytes);
                            }
                            _ => runs.push((plo, phi, v, bytes.to_vec())),
                        }
                    }
                    Some(l) if l.stores & bit(store) != 0 && l.version < v && !l.on_base => {
                        // A newer copy the map does not know of (a write whose outcome was
                        // unknown, still being retried or never acknowledged) hides the
                        // current one on this store, which will never be offered: adopt it,
                        // as recovery would. Reads may return it: its write is concurrent.
                        useful = true;
                        self.stores[store]
                            .stale
                            .update(plo, phi, |_, _, old| match old {
                                Some(x) if x.version <= v && !x.sent => None,
                                other => other.copied(),
                            });
                        self.apply_offloaded(plo, phi, v, bit(store));
                        self.vulnerable.push_back((plo, phi));
                    }
                    _ => {
                        // Work only if its delete may go (else read_any backs off).
                        useful |= self.delete_allowed(store, plo, phi, v);
                        self.add_stale(store, plo, phi, v);
                    }
                }
            }
        }
        if runs.is_empty() {
            self.reclaim_jobs -= 1;
            return useful;
        }
        let job = self.id();
        let count = runs.len() as u32;
        let mut done = Vec::with_capacity(runs.len());
        for (lo, hi, v, data) in runs {
            let id = self.id();
            self.reclaiming.insert(lo, hi, job);
            self.base_pending.insert(id, BaseKind::Reclaim { job });
            self.base_in_flight += 1;
            self.base_out.push_back(BaseOp::Write {
                id,
                offset_bytes: lo,
                data,
                durable: true,
            });
            done.push((lo, hi, v));
        }
        self.reclaim_writes.insert(job, (done, count));
        true
    }

    /// A reclaim write reached the base volume (durably): the range reads from the base from now
    /// on, and its copies are deleted once every older copy is (invariant 3).
    fn reclaim_written(&mut self, job: u64) {
        let entry = self.reclaim_writes.get_mut(&job).expect("reclaim job");
        entry.1 -= 1;
        if entry.1 > 0 {
            return;
        }
        let (runs, _) = self.reclaim_writes.remove(&job).expect("reclaim job");
        self.reclaim_jobs -= 1;
        for (lo, hi, v) in runs {
            self.reclaiming.remove(lo, hi);
            let (mut written, mut holders) = (0, 0);
            self.map.update(lo, hi, |a, b, old| {
                old.map(|l| {
                    if l.version == v && !l.on_base {
                        written += b - a;
                        holders |= l.stores;
                        Loc {
                            on_base: true,
                            ..*l
                        }
                    } else {
                        *l
                    }
                })
            });
            self.stats.reclaimed_bytes += written;
            if written > 0 {
                // Deletes held back by this copy (on the stores holding it) may go now.
                for s in indices(holders) {
                    let st = &mut self.stores[s];
                    st.stale_dirty |= !st.stale.is_empty();
                }
                self.settling.push(Settle {
                    start: lo,
                    end: hi,
                    version: v,
                    deleting: false,
                });
                self.settle_dirty = true;
            }
        }
    }

    /// Advances reclaims waiting on deletes: once no older copy remains, the copies of the
    /// reclaimed version are deleted; once those are gone too, the range leaves the map.
    fn pump_settle(&mut self) {
        let mut changed = false;
        let mut i = 0;
        while i < self.settling.len() {
            let Settle {
                start,
                end,
                version,
                deleting,
            } = self.settling[i];
            // The parts still holding this version (newer writes may have taken the rest).
            let parts: Vec<(u64, u64, u64)> = self
                .map
                .lookup(start, end)
                .into_iter()
                .filter_map(|p| {
                    p.value
                        .filter(|l| l.version == version && l.on_base)
                        .map(|l| (p.start, p.end, l.stores))
                })
                .collect();
            if !deleting {
                // Invariant 3: every older copy is gone (or goes with this version's own
                // delete: on a store holding this version, deleting it deletes every older
                // copy there too); the highest version may go now.
                if parts
                    .iter()
                    .any(|&(lo, hi, stores)| self.older_copies_elsewhere(lo, hi, version, stores))
                {
                    i += 1;
                    continue;
                }
                for &(lo, hi, stores) in &parts {
                    for s in indices(stores) {
                        self.add_stale(s, lo, hi, version);
                    }
                }
                self.settling[i].deleting = true;
                changed = true;
                i += 1;
                continue;
            }
            if parts.iter().any(|&(lo, hi, _)| self.blocking_stale(lo, hi)) {
                i += 1;
                continue;
            }
            let mut removed = 0;
            for &(lo, hi, _) in &parts {
                self.map.update(lo, hi, |a, b, old| match old {
                    Some(l) if l.version == version && l.on_base => {
                        removed += b - a;
                        None
                    }
                    old => old.copied(),
                });
            }
            self.stats.offloaded_bytes -= removed;
            self.settling.swap_remove(i);
            changed = true;
        }
        // What changed here may unblock other entries: look once more at the next pump.
        self.settle_dirty |= changed;
    }

    // -----------------------------------------------------------------------------------------
    // Recovery

    fn superblock_read(&mut self, data: &[u8]) {
        match Superblock::decode(data) {
            Err(e) => {
                self.phase = Phase::Failed(e);
                while let Some((id, _)) = self.queued_upward.pop_front() {
                    self.upward_out
                        .push_back((id, UpReply::Error(ClientError::NoStoreSet(e))));
                }
            }
            Ok(sb) => {
                self.generation = sb.generation + 1;
                self.degraded = sb.degraded;
                self.degraded_durable = sb.degraded;
                self.next_counter = 1;
                self.stores = sb
                    .stores
                    .into_iter()
                    .map(|info| new_store_state(info, self.now))
                    .collect();
                let n = self.stores.len();
                self.phase = Phase::Fetching(Fetch {
                    superblock_written: false,
                    all_needed: sb.degraded,
                    metadata: vec![None; n],
                    records: vec![None; n],
                    retry_at: vec![None; n],
                    failed: vec![false; n],
                    started: self.now,
                });
                self.write_superblock();
                for s in 0..n {
                    self.fetch_from(s);
                }
                self.maybe_finish_fetch();
            }
        }
    }

    fn fetch_from(&mut self, s: StoreIdx) {
        let Phase::Fetching(f) = &self.phase else {
            return;
        };
        let (need_meta, need_records) = (f.metadata[s].is_none(), f.records[s].is_none());
        let waiting = self.outstanding.values().any(|o| {
            o.store == s
                && matches!(
                    o.pending,
                    Pending::Metadata | Pending::RecordsMeta | Pending::Records
                )
        });
        if waiting {
            return;
        }
        if need_meta {
            self.send(
                s,
                Request::Metadata {
                    client: self.config.client,
                },
                Pending::Metadata,
            );
        }
        if need_records {
            self.send(
                s,
                Request::Metadata {
                    client: companion(self.config.client),
                },
                Pending::RecordsMeta,
            );
        }
    }

    /// Finishes recovery once every store answered, or once the grace period is over and the
    /// stores that did not answer (each failed at least once) are few enough that every
    /// acknowledged write has a copy among those that did.
    fn maybe_finish_fetch(&mut self) {
        let Phase::Fetching(f) = &self.phase else {
            return;
        };
        if !f.superblock_written {
            return;
        }
        let missing: Vec<StoreIdx> = (0..self.stores.len())
            .filter(|&s| f.metadata[s].is_none() || f.records[s].is_none())
            .collect();
        if !missing.is_empty() {
            let graced = self.now >= f.started + self.config.recovery_grace_ns;
            let tolerable = !f.all_needed && missing.len() < self.config.n_way;
            if !(graced && tolerable && missing.iter().all(|&s| f.failed[s])) {
                return;
            }
            // Their copies become stale: ranges they held have fewer than N copies until
            // reclaimed, so a later restart must not go on without the others.
            if !self.degraded_is_durable() {
                self.set_degraded();
                return;
            }
        }
        let Phase::Fetching(f) = std::mem::replace(&mut self.phase, Phase::Ready) else {
            unreachable!()
        };
        self.merge(f);
        self.become_ready();
    }

    /// While recovering (fetching every store's ranges): who answered and who is missing.
    pub fn recovery_wait(&self) -> Option<RecoveryWait> {
        let Phase::Fetching(f) = &self.phase else {
            return None;
        };
        let live: Vec<StoreIdx> = (0..self.stores.len())
            .filter(|&s| !self.stores[s].removed)
            .collect();
        let missing: Vec<StoreIdx> = live
            .iter()
            .copied()
            .filter(|&s| f.metadata[s].is_none() || f.records[s].is_none())
            .collect();
        let id = |s: &StoreIdx| self.stores[*s].info.id;
        Some(RecoveryWait {
            answered: live.len() - missing.len(),
            stores: live.len(),
            needed: if f.all_needed {
                live.len()
            } else {
                live.len().saturating_sub(self.config.n_way - 1).max(1)
            },
            failed: missing.iter().filter(|&&s| f.failed[s]).map(id).collect(),
            silent: missing.iter().filter(|&&s| !f.failed[s]).map(id).collect(),
        })
    }

    /// Rebuilds the soft state: deletion records first (what is owed to whom), then every
    /// store's valid ranges merged by version.
    ///
    /// A store that did not answer is failed from the start, and everything it may hold from
    /// earlier lives is stale: the map is built without it (every acknowledged write has a copy
    /// elsewhere), so any copy there is older than the map's or was never acknowledged. One
    /// stale entry over the whole volume, up to the last version of earlier lives, stands for
    /// it: until a deletion record of it is durable (written at once, like any failed store's)
    /// it blocks deletes of current copies and sends writes to stores (invariants 2 and 3), and
    /// when the store returns one delete clears it.
    fn merge(&mut self, mut f: Fetch) {
        let n = self.stores.len();
        let missing: Vec<bool> = (0..n)
            .map(|s| f.metadata[s].is_none() || f.records[s].is_none())
            .collect();
        for s in 0..n {
            if missing[s] {
                f.metadata[s] = None;
                f.records[s] = None;
            }
        }
        let mut owed: Vec<RangeMap<(u64, u64)>> = vec![RangeMap::new(); n];
        for (holder, pieces) in f.records.into_iter().enumerate() {
            for (e, data) in pieces.unwrap_or_default() {
                let slot = e.offset_bytes >> SLOT_SHIFT;
                self.next_slot = self.next_slot.max(slot + 1);
                let Some(record) = DeletionRecord::decode(&data) else {
                    continue;
                };
                let target = self
                    .stores
                    .iter()
                    .position(|s| !s.removed && s.info.id == record.target);
                let info = self.records.entry(slot).or_insert(DelRecordInfo {
                    target: target.unwrap_or(usize::MAX),
                    version: e.version,
                    bytes: e.length_bytes,
                    holders: 0,
                    writing: 0,
                    entries: record.entries.clone(),
                    collecting: 0,
                    collect: target.is_none(),
                });
                info.holders |= bit(holder);
                info.version = info.version.max(e.version);
                if let Some(t) = target {
                    for &(lo, hi, v) in &record.entries {
                        owed[t].update(lo, hi, |_, _, old| match old {
                            Some(&(ov, os)) if ov >= v => Some((ov, os)),
                            _ => Some((v, slot)),
                        });
                    }
                }
            }
        }
        let earlier_lives = (self.generation << VERSION_BITS) - 1;
        let usable = self.config.usable_bytes();
        for (s, missing) in missing.iter().enumerate() {
            if !missing || self.stores[s].removed {
                continue;
            }
            let st = &mut self.stores[s];
            st.up = false;
            st.down_since = self.now;
            st.next_probe = self.now;
            st.may_hold = true;
            self.stats.store_failures += 1;
            st.old_records = Some((earlier_lives, false));
            self.add_stale(s, 0, usable, earlier_lives);
        }
        for (s, extents) in f.metadata.into_iter().enumerate() {
            let Some(extents) = extents else { continue };
            self.stores[s].may_hold = !extents.is_empty();
            for e in extents {
                let (lo, hi, v) = (e.offset_bytes, e.offset_bytes + e.length_bytes, e.version);
                // (start, end, the (version, slot) of a deletion record covering it).
                type Owed = (u64, u64, Option<(u64, u64)>);
                let parts: Vec<Owed> = owed[s]
                    .lookup(lo, hi)
                    .into_iter()
                    .map(|p| (p.start, p.end, p.value.copied()))
                    .collect();
                for (plo, phi, del) in parts {
                    match del {
                        Some((dv, slot)) if dv >= v => {
                            self.stores[s].stale.update(plo, phi, |_, _, _| {
                                Some(Stale {
                                    version: v,
                                    sent: false,
                                    recording: false,
                                    slot: Some(slot),
                                })
                            });
                        }
                        _ => self.apply_offloaded(plo, phi, v, bit(s)),
                    }
                }
            }
            self.stores[s].stale_dirty = true;
        }
        for s in 0..n {
            self.maybe_collect_records(s);
        }
        let vulnerable: Vec<(u64, u64)> = self
            .map
            .iter()
            .filter(|(_, _, l)| (l.stores.count_ones() as usize) < self.config.n_way)
            .map(|(a, b, _)| (a, b))
            .collect();
        self.vulnerable.extend(vulnerable);
    }

    // -----------------------------------------------------------------------------------------

    /// Work every event may unblock.
    fn pump(&mut self) {
        if !self.is_ready() {
            return;
        }
        if self.stores.iter().any(|s| s.stale_dirty) {
            self.settle_dirty = true;
        }
        self.pump_stale();
        self.pump_old_records();
        if std::mem::take(&mut self.settle_dirty) {
            self.pump_settle();
        } else if cfg!(debug_assertions) {
            // Checks that `settle_dirty` follows every change a settling entry waits for: a
            // pass now must change nothing.
            let state = |c: &Client| -> Vec<(u64, bool)> {
                c.settling.iter().map(|s| (s.version, s.deleting)).collect()
            };
            let before = state(self);
            self.pump_settle();
            assert_eq!(
                before,
                state(self),
                "a settling reclaim progressed without settle_dirty: {}",
                self.describe()
            );
            self.settle_dirty = false;
        }
        self.pump_stale();
        self.pump_reclaim();
        self.pump_degraded();
    }
}

enum WriteOutcome {
    Done,
    NotWritten,
    Unknown,
}

fn new_store_state(info: StoreInfo, now: Nanos) -> StoreState {
    StoreState {
        info,
        removed: false,
        up: true,
        down_since: now,
        next_probe: now,
        probing: false,
        reported_load: 0,
        in_flight: 0,
        deletes_in_flight: 0,
        last_heard: now,
        busy_since: now,
        may_hold: false,
        any_in_flight: 0,
        any_window: 1,
        reclaim_after: 0,
        writes_acked: 0,
        stale: RangeMap::new(),
        stale_dirty: false,
        record_after: 0,
        old_records: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A formatted client with one store, its superblock written; ready.
    fn ready(policy: Policy) -> Client {
        let mut config = Config::new(7, 1, 1 << 20);
        config.policy = policy;
        let mut c = Client::format(config, vec![StoreInfo { id: 1, server: 1 }], 0);
        let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
            panic!("the superblock is written first");
        };
        c.handle_base(1, BaseDone::Written { id });
        assert!(c.is_ready());
        c
    }

    fn write(c: &mut Client, up_id: u64, offset_bytes: u64) {
        c.handle_upward(
            2,
            up_id,
            Upward::Write {
                offset_bytes,
                data: vec![up_id as u8; 4096],
                durable: false,
            },
        );
    }

    /// The store's answer to the one write request waiting.
    /// (Reclaim requests before it — full stores are reclaimed under load — stay unanswered.)
    fn answer(c: &mut Client, reply: Reply) {
        let (store, id, request) = std::iter::from_fn(|| c.poll_store())
            .find(|(_, _, r)| !matches!(r, Request::ReadAny { .. } | Request::Read { .. }))
            .expect("a store request");
        assert!(matches!(request, Request::Write { .. }), "{request:?}");
        c.handle_store(3, store, id, reply, Some(0));
    }

    /// A volume formatted without stores (a plain volume) writes to the base volume under any
    /// policy, reads from it, and restarts without waiting for anything.
    #[test]
    fn a_client_without_stores_is_a_plain_volume() {
        for policy in [Policy::Peak, Policy::Always, Policy::Baseline] {
            let mut config = Config::new(7, 1, 1 << 20);
            config.policy = policy;
            config.t_base = 0;
            let mut c = Client::format(config.clone(), Vec::new(), 0);
            let Some(BaseOp::Write {
                id,
                data: superblock,
                ..
            }) = c.poll_base()
            else {
                panic!("the superblock is written first");
            };
            c.handle_base(1, BaseDone::Written { id });
            assert!(c.is_ready());
            write(&mut c, 1, 8192);
            assert!(c.poll_store().is_none(), "no store to off-load to");
            let Some(BaseOp::Write {
                id, offset_bytes, ..
            }) = c.poll_base()
            else {
                panic!("the write goes to the base volume");
            };
            assert_eq!(offset_bytes, 8192);
            c.handle_base(2, BaseDone::Written { id });
            assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
            assert!(c.is_quiescent());

            // A restart reads the (empty) store set and serves at once.
            let mut r = Client::recover(config, 10);
            let Some(BaseOp::Read { id, .. }) = r.poll_base() else {
                panic!("the superblock is read first");
            };
            r.handle_base(
                11,
                BaseDone::Read {
                    id,
                    data: superblock,
                },
            );
            while let Some(op) = r.poll_base() {
                if let BaseOp::Write { id, .. } = op {
                    r.handle_base(12, BaseDone::Written { id });
                }
            }
            assert!(r.poll_store().is_none());
            assert!(r.is_ready(), "{policy:?}: {:?}", r.recovery_wait());
        }
    }

    #[test]
    fn a_full_store_under_the_always_policy_refuses_only_writes_that_must_stay_off_loaded() {
        let mut c = ready(Policy::Always);
        write(&mut c, 1, 0);
        answer(&mut c, Reply::Done);
        assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));

        // The store is now full. A write over the off-loaded block cannot go to the base volume
        // (the store's older copy would shadow it after a restart), and is never retried into a
        // hang: it is refused.
        write(&mut c, 2, 0);
        answer(&mut c, Reply::Error(StoreError::Full));
        assert_eq!(
            c.poll_upward(),
            Some((2, UpReply::Error(ClientError::NoSpace)))
        );
        assert_eq!(c.stats().refused_writes, 1);
        // A write elsewhere falls back to the base volume.
        write(&mut c, 3, 65536);
        answer(&mut c, Reply::Error(StoreError::Full));
        let Some(BaseOp::Write {
            id, offset_bytes, ..
        }) = c.poll_base()
        else {
            panic!("the write goes to the base volume");
        };
        assert_eq!(offset_bytes, 65536);
        c.handle_base(4, BaseDone::Written { id });
        assert_eq!(c.poll_upward(), Some((3, UpReply::Written)));
        // The refused write changed nothing: the block still reads as the first write.
        c.handle_upward(
            5,
            4,
            Upward::Read {
                offset_bytes: 0,
                length_bytes: 4096,
            },
        );
        let (store, id, request) = c.poll_store().expect("read from the store");
        let Request::Read { .. } = request else {
            panic!("{request:?}");
        };
        let extent = Extent {
            volume: 1,
            offset_bytes: 0,
            length_bytes: 4096,
            version: match c.ranges().next() {
                Some((_, _, loc)) => loc.version,
                None => panic!("the block is off-loaded"),
            },
        };
        c.handle_store(
            6,
            store,
            id,
            Reply::Read(vec![(extent, vec![1u8; 4096])]),
            None,
        );
        assert_eq!(c.poll_upward(), Some((4, UpReply::Read(vec![1u8; 4096]))));
    }

    /// A store whose log was damaged answers a read with an older copy (or none) of a range it
    /// acknowledged: the read is served from the other copy, never from the older one, and the
    /// damaged store is dropped from the range's holders.
    #[test]
    fn a_store_that_lost_an_acknowledged_copy_is_read_around() {
        let mut config = Config::new(7, 1, 1 << 20);
        config.policy = Policy::Always;
        config.n_way = 2;
        let stores = vec![
            StoreInfo { id: 1, server: 1 },
            StoreInfo { id: 2, server: 2 },
        ];
        let mut c = Client::format(config, stores, 0);
        let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
            panic!("the superblock is written first");
        };
        c.handle_base(1, BaseDone::Written { id });
        for (up_id, fill) in [(1, 1u8), (2, 2u8)] {
            c.handle_upward(
                2,
                up_id,
                Upward::Write {
                    offset_bytes: 0,
                    data: vec![fill; 4096],
                    durable: false,
                },
            );
            let sent: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
            assert_eq!(sent.len(), 2, "{sent:?}");
            for (store, id, _) in sent {
                c.handle_store(3, store, id, Reply::Done, Some(0));
            }
            assert_eq!(c.poll_upward(), Some((up_id, UpReply::Written)));
        }
        let current = c.ranges().next().expect("off-loaded").2.version;
        for bad in [Some(current - 1), None] {
            c.handle_upward(
                4,
                9,
                Upward::Read {
                    offset_bytes: 0,
                    length_bytes: 4096,
                },
            );
            let (store, id, _) = c.poll_store().expect("a read");
            let pieces = bad.map_or(Vec::new(), |version| {
                let e = Extent {
                    volume: 1,
                    offset_bytes: 0,
                    length_bytes: 4096,
                    version,
                };
                vec![(e, vec![1u8; 4096])]
            });
            c.handle_store(5, store, id, Reply::Read(pieces), Some(0));
            let (other, id, request) = c.poll_store().expect("read again elsewhere");
            assert_ne!(other, store, "{request:?}");
            let e = Extent {
                volume: 1,
                offset_bytes: 0,
                length_bytes: 4096,
                version: current,
            };
            c.handle_store(
                6,
                other,
                id,
                Reply::Read(vec![(e, vec![2u8; 4096])]),
                Some(0),
            );
            assert_eq!(c.poll_upward(), Some((9, UpReply::Read(vec![2u8; 4096]))));
            assert_eq!(
                c.ranges().next().expect("still off-loaded").2.stores,
                bit(other)
            );
            // The next damage is found on the remaining holder: start over with both.
            c.map
                .update(0, 4096, |_, _, o| o.map(|l| Loc { stores: 0b11, ..*l }));
        }
        assert_eq!(c.stats().lost_copies, 2);
        assert_eq!(c.stats().lost_bytes, 0);
    }

    /// A write acknowledged with fewer than N copies waits until the superblock says
    /// "degraded"; a restart then waits for every store instead of going on without N−1.
    #[test]
    fn a_write_left_with_fewer_than_n_copies_makes_a_restart_wait_for_every_store() {
        let mut config = Config::new(7, 1, 1 << 20);
        config.policy = Policy::Always;
        config.n_way = 2;
        let stores = vec![
            StoreInfo { id: 1, server: 1 },
            StoreInfo { id: 2, server: 2 },
        ];
        let mut c = Client::format(config.clone(), stores, 0);
        let Some(BaseOp::Write { id, data, .. }) = c.poll_base() else {
            panic!("the superblock is written first");
        };
        assert!(!Superblock::decode(&data).expect("superblock").degraded);
        c.handle_base(1, BaseDone::Written { id });
        write(&mut c, 1, 0);
        let sent: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
        assert_eq!(sent.len(), 2, "{sent:?}");
        c.handle_store(3, sent[0].0, sent[0].1, Reply::Done, Some(0));
        c.handle_store(
            3,
            sent[1].0,
            sent[1].1,
            Reply::Error(StoreError::Full),
            Some(0),
        );
        // One copy: not acknowledged before the flag is durable.
        assert_eq!(c.poll_upward(), None);
        let Some(BaseOp::Write { id, data, .. }) = c.poll_base() else {
            panic!("the superblock is written again");
        };
        let degraded = Superblock::decode(&data).expect("superblock");
        assert!(degraded.degraded);
        c.handle_base(4, BaseDone::Written { id });
        assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));

        // The client restarts; store 2 answers only "recovering".
        let mut r = Client::recover(config, 10);
        let Some(BaseOp::Read { id, .. }) = r.poll_base() else {
            panic!("the superblock is read first");
        };
        r.handle_base(11, BaseDone::Read { id, data });
        let Some(BaseOp::Write { id, .. }) = r.poll_base() else {
            panic!("the next generation is written");
        };
        r.handle_base(12, BaseDone::Written { id });
        let mut now = 13;
        while now < 3 * r.config.recovery_grace_ns {
            while let Some((store, id, request)) = r.poll_store() {
                assert!(matches!(request, Request::Metadata { .. }), "{request:?}");
                let reply = if store == 0 {
                    Reply::Metadata(Vec::new())
                } else {
                    Reply::Error(StoreError::Recovering)
                };
                r.handle_store(now, store, id, reply, Some(0));
            }
            now = r.poll_timeout().expect("a retry").max(now + 1);
            r.handle_timeout(now);
        }
        assert!(!r.is_ready(), "{}", r.describe());
        let wait = r.recovery_wait().expect("recovering");
        assert_eq!((wait.answered, wait.needed, wait.failed), (1, 2, vec![2]));
    }

    #[test]
    fn full_stores_are_reclaimed_under_load_and_a_write_that_cannot_wait_gets_enospc() {
        let mut c = ready(Policy::Peak);
        c.set_external_base_load(1000); // loaded: no reclaim unless the stores are full
        write(&mut c, 1, 0);
        answer(&mut c, Reply::Done);
        assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
        assert!(c.stores_full_since().is_none());
        write(&mut c, 2, 0);
        answer(&mut c, Reply::Error(StoreError::Full));
        assert_eq!(c.stores_full_since(), Some(3));
        let (mut reclaim_requests, mut refused_at) = (0, None);
        let mut now = 3;
        while now < 20_000_000_000 && refused_at.is_none() {
            while let Some((store, id, request)) = c.poll_store() {
                let reply = match request {
                    Request::Write { .. } => Reply::Error(StoreError::Full),
                    Request::ReadAny { .. } => {
                        reclaim_requests += 1;
                        Reply::ReadAny(None)
                    }
                    Request::Read { .. } => {
                        reclaim_requests += 1;
                        Reply::Read(Vec::new())
                    }
                    other => panic!("{other:?}"),
                };
                c.handle_store(now, store, id, reply, Some(0));
            }
            if let Some(up) = c.poll_upward() {
                assert_eq!(up, (2, UpReply::Error(ClientError::NoSpace)));
                refused_at = Some(now);
            }
            now = c.poll_timeout().unwrap_or(now + 100_000_000).max(now + 1);
            c.handle_timeout(now);
        }
        assert!(
            reclaim_requests > 0,
            "reclaim runs under load when the stores are full"
        );
        let refused_at = refused_at.expect("the write is answered ENOSPC");
        assert!(
            (5_000_000_000..6_000_000_000).contains(&refused_at),
            "answered at {refused_at} ns"
        );
        assert_eq!(c.stats().refused_writes, 1);
    }

    #[test]
    fn a_full_store_under_the_peak_policy_parks_the_write_until_a_retry() {
        let mut c = ready(Policy::Peak);
        c.set_external_base_load(1000); // loaded: writes are off-loaded
        write(&mut c, 1, 0);
        answer(&mut c, Reply::Done);
        assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
        write(&mut c, 2, 0);
        answer(&mut c, Reply::Error(StoreError::Full));
        assert_eq!(
            c.poll_upward(),
            None,
            "parked, not refused: reclaim makes room"
        );
        let retry = c.poll_timeout().expect("a retry is scheduled");
        c.handle_timeout(retry);
        answer(&mut c, Reply::Done);
        assert_eq!(c.poll_upward(), Some((2, UpReply::Written)));
    }
}
