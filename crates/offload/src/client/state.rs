//! The client's state: its parts — per store, per request in flight, per upward read and write,
//! recovery's fetch, the phase of the client's life — and the `Client` itself, whose fields
//! every module of the client shares, with its empty start.

use super::*;

/// A stale copy on one store, waiting for its delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stale {
    /// Delete versions up to this one.
    pub(super) version: u64,
    /// A delete is in flight.
    pub(super) sent: bool,
    /// A deletion record for it is being written.
    pub(super) recording: bool,
    /// The durable deletion record naming it: it no longer blocks invariant 3.
    pub(super) slot: Option<u64>,
}

pub(super) struct StoreState {
    pub(super) info: StoreInfo,
    pub(super) removed: bool,
    pub(super) up: bool,
    pub(super) down_since: Nanos,
    pub(super) next_probe: Nanos,
    pub(super) probing: bool,
    pub(super) reported_load: u64,
    /// The load of the volume that shares the store's disk (the disk's operations that are
    /// not the store's), as the store last reported it: reclaim of a quiet base volume asks a
    /// store at T_store or more one read_any at a time.
    pub(super) volume_load: u64,
    pub(super) in_flight: u64,
    /// Deletes in flight (capped, so a store short of space is not flooded).
    pub(super) deletes_in_flight: u64,
    /// When the store last answered anything, and when it last went from idle to busy: a
    /// store silent for the timeout while requests are outstanding has failed (a slow answer
    /// to one request, e.g. a delete waiting for log space, is not a failure).
    pub(super) last_heard: Nanos,
    pub(super) busy_since: Nanos,
    /// read_any may find data for us.
    pub(super) may_hold: bool,
    /// read_any requests in flight, and how many may be: a store offers its records in turn
    /// and offers them again once all were, so more requests than it has records to offer only
    /// read the same records again. The window doubles (up to N_reclaim) while answers bring
    /// new work and falls back to one when one does not.
    pub(super) any_in_flight: u64,
    pub(super) any_window: u64,
    /// No read_any before this: the last one found only data being settled or still being
    /// written, which the store offers again until that work is done.
    pub(super) reclaim_after: Nanos,
    /// Successful writes so far (a read_any answering "nothing" clears `may_hold` only if no
    /// write succeeded since it was sent).
    pub(super) writes_acked: u64,
    pub(super) stale: RangeMap<Stale>,
    pub(super) stale_dirty: bool,
    /// No deletion record for this (failed) store before this: the last one was refused by a
    /// holder (e.g. a full log), and writing it again at once would only be refused again.
    pub(super) record_after: Nanos,
    /// Missed at a recovery: the deletion records it holds from earlier lives (copies of
    /// records also held by stores that answered) are deleted when it returns, up to this
    /// version; `true` while that delete is in flight.
    pub(super) old_records: Option<(u64, bool)>,
    /// Ranges where a newer copy whose outcome here is unknown may still land and hide the
    /// current copy, which this store alone holds (see `copy_hidden`): reads of them here wait
    /// until the store has answered a barrier sent after that copy (`Pending::Seal`), after
    /// which nothing sent before it can land any more.
    pub(super) unsealed: Vec<(u64, u64)>,
    /// A barrier in flight, and no other before this time (one refused is not sent again at
    /// once).
    pub(super) seal_in_flight: bool,
    pub(super) seal_after: Nanos,
}

pub(super) enum Pending {
    Write {
        op: u64,
    },
    /// A store read for upward read `read`: the spans wanted of what it answers, each with
    /// the version the range map named for it when the read was sent (sorted, disjoint).
    Read {
        read: u64,
        spans: Vec<Span>,
    },
    ReclaimAny {
        writes_acked: u64,
    },
    /// A read of vulnerable data `[start, end)` for reclaim (queued again if it fails).
    ReclaimRead {
        start: u64,
        end: u64,
    },
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
    /// A barrier (`metadata`): answered once every write this client sent the store before it
    /// is settled there (those still waiting for room are refused), so that nothing sent
    /// before it lands later. Covers the first `covers` ranges of the store's `unsealed`.
    Seal {
        covers: usize,
    },
}

pub(super) struct Outstanding {
    pub(super) store: StoreIdx,
    pub(super) pending: Pending,
}

pub(super) struct WriteOp {
    pub(super) up_id: u64,
    pub(super) start: u64,
    pub(super) data: Vec<u8>,
    pub(super) durable: bool,
    pub(super) version: u64,
    /// Stores asked and not yet answered, answered with success, and failed (not retried).
    pub(super) waiting: u32,
    pub(super) succeeded: u64,
    pub(super) tried: u64,
    /// Stores asked and not yet answered: a delete sent there now could land after the copy.
    pub(super) asked: u64,
    /// Parts a newer write took while this one was in flight (it completed first, see
    /// `supersede`): the newer one wins there (deletes owed for it may remove this copy).
    pub(super) superseded: Vec<(u64, u64)>,
    /// When every store first refused it as full.
    pub(super) full_since: Option<Nanos>,
    /// When it first had some copies but fewer than N (it waits for the rest).
    pub(super) short_since: Option<Nanos>,
    /// Answered already, with an error: fewer than N copies in time, or no store took it in
    /// time (see [`Client::answer_late`]); the stores asked still owe their answers.
    pub(super) answered: bool,
    /// When it arrived (the clock of `full_timeout_ns`).
    pub(super) arrived: Nanos,
}

pub(super) struct ReadOp {
    pub(super) up_id: u64,
    pub(super) start: u64,
    pub(super) len: u64,
    /// Empty until the first piece arrives: a piece covering the whole read becomes the
    /// buffer as it is (no copy); otherwise the pieces are copied into `len` bytes.
    pub(super) buf: Vec<u8>,
    /// A base read of the whole range is in flight: its buffer becomes `buf`, so pieces that
    /// arrive before it wait in `early` (their bytes and where they go) rather than in a
    /// zeroed buffer the base's bytes would then be copied into.
    pub(super) whole_base: bool,
    pub(super) early: Vec<(u64, Vec<u8>)>,
    pub(super) outstanding: u32,
    /// A piece failed: the read is answered with this once every piece is in.
    pub(super) error: Option<ClientError>,
}

pub(super) enum BaseKind {
    /// If it fails it is off-loaded with a fresh version and wins over every write issued
    /// while it was in flight (see `base_step`).
    UpWrite {
        up_id: u64,
        start: u64,
        end: u64,
    },
    /// A base read for upward read `read` from `start`: the `keep` spans are the read's, the
    /// bytes between them pieces read elsewhere (see `read_piece`); none: it is one piece.
    UpRead {
        read: u64,
        start: u64,
        keep: Vec<(u64, u64)>,
    },
    Reclaim {
        job: u64,
        run: usize,
    },
    Superblock,
    /// The local copy of off-loaded write `key` (Sierra §3.6, `local.rs`).
    LocalCopy {
        key: u64,
    },
}

/// A reclaim whose base write is done, waiting for older copies to go, then for its own copies.
pub(super) struct Settle {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) version: u64,
    pub(super) deleting: bool,
}

pub(super) struct DelRecordInfo {
    pub(super) target: StoreIdx,
    pub(super) version: u64,
    /// Length of the record's payload (the range it occupies in the companion's space).
    pub(super) bytes: u64,
    pub(super) holders: u64,
    /// Holders still to acknowledge the write (while being written).
    pub(super) writing: u64,
    pub(super) entries: Vec<(u64, u64, u64)>,
    /// Being garbage-collected: holders with a delete in flight.
    pub(super) collecting: u64,
    pub(super) collect: bool,
}

pub(super) enum Phase {
    /// Writing the store set of a new volume.
    Formatting,
    /// Reading the store set.
    ReadingSuperblock,
    /// Asking every store for its metadata and deletion records.
    Fetching(Fetch),
    /// The range map is rebuilt and holds data with fewer than N copies (a write found on
    /// fewer stores, newer than the rest): the superblock is marked "degraded" durably before
    /// anything is served, so that a restart cannot go on without the stores holding it.
    Marking,
    Ready,
    Failed(SuperblockError),
    /// A store refused a request as fenced: a newer incarnation of this client recovered from
    /// it, so this one is deposed and serves nothing more (every request gets
    /// [`ClientError::Fenced`]).
    Fenced,
}

pub(super) struct Fetch {
    pub(super) superblock_written: bool,
    /// The superblock says "degraded": some acknowledged data may have fewer than N copies,
    /// so every store must answer.
    pub(super) all_needed: bool,
    pub(super) metadata: Vec<Option<Vec<Extent>>>,
    pub(super) records: Vec<Option<Vec<Piece>>>,
    pub(super) retry_at: Vec<Option<Nanos>>,
    /// Stores that failed a fetch request (down, refusing, recovering, silent) at least once.
    pub(super) failed: Vec<bool>,
    pub(super) started: Nanos,
}

pub(super) enum WriteOutcome {
    Done,
    NotWritten,
    Unknown,
}

pub(super) fn new_store_state(info: StoreInfo, now: Nanos) -> StoreState {
    StoreState {
        info,
        removed: false,
        up: true,
        down_since: now,
        next_probe: now,
        probing: false,
        reported_load: 0,
        volume_load: 0,
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
        unsealed: Vec::new(),
        seal_in_flight: false,
        seal_after: 0,
    }
}

pub struct Client {
    pub(super) config: Config,
    pub(super) phase: Phase,
    pub(super) generation: u64,
    pub(super) next_counter: u64,
    pub(super) stores: Vec<StoreState>,
    pub(super) map: LocMap,
    pub(super) next_id: u64,
    pub(super) outstanding: BTreeMap<u64, Outstanding>,
    pub(super) writes: FxHashMap<u64, WriteOp>,
    pub(super) reads: FxHashMap<u64, ReadOp>,
    pub(super) base_pending: FxHashMap<u64, BaseKind>,
    /// Base I/Os in flight from the upper layer and from reclaim.
    pub(super) base_in_flight: u64,
    /// Load on the base volume that is not ours (a co-hosted store), told by the driver.
    pub(super) external_base_load: u64,
    /// Under [`Policy::WhileBaseUnavailable`]: whether every replica takes writes.
    pub(super) base_available: bool,
    /// Preference among stores by id (lower first; 0 when not told): Sierra's logger
    /// locality classes (§3.6). Load orders stores within a class.
    pub(super) store_rank: BTreeMap<u64, u8>,
    pub(super) queued_upward: VecDeque<(u64, Upward)>,
    pub(super) parked_reads: Vec<(u64, u64, u64)>,
    /// Reads that arrived after an overlapping off-loaded write was answered with an error
    /// while its copies may still enter the range map (held for the "degraded" mark, or
    /// stores still owing answers): they start once no such write overlaps them, so that a
    /// failed write never shows after a later read saw the data beneath it.
    pub(super) reads_behind_failed_writes: Vec<u64>,
    pub(super) parked_writes: Vec<u64>,
    /// Since when the stores refuse writes as full (cleared by a write a store accepts):
    /// reclaim then runs whatever the base volume's load.
    pub(super) stores_full_since: Option<Nanos>,
    /// Parked writes are tried again then (stores may have room, or the range may no longer
    /// need to be off-loaded).
    pub(super) parked_retry_at: Option<Nanos>,
    pub(super) reclaim_jobs: usize,
    /// Reclaim jobs of vulnerable ranges (reading them, then writing them to the base volume):
    /// other data waits for them (vulnerable data first, not merely alongside).
    pub(super) vulnerable_jobs: usize,
    /// Reclaim jobs writing to the base volume: the spans written, writes left, and whether the
    /// job reclaims vulnerable data.
    pub(super) reclaim_writes: FxHashMap<u64, (Vec<Span>, u32, bool)>,
    /// Local copies of off-loaded writes (Sierra §3.6), by write key, until they mark their
    /// ranges or are found useless (`local.rs`).
    pub(super) local: FxHashMap<u64, local::LocalCopy>,
    /// With local copies: the base operations in flight that write the local replica, and
    /// the bytes they write.
    pub(super) local_disk: FxHashMap<u64, (u64, u64)>,
    /// Ranges with a reclaim write to the base volume in flight (by job). A newer version of
    /// an overlapping range waits for it: the disk may complete concurrent writes in any order.
    pub(super) reclaiming: RangeMap<u64>,
    pub(super) settling: Vec<Settle>,
    /// Something a settling reclaim waits for may have changed (a stale list, a deletion
    /// record, the range map): `pump_settle` looks at every entry again only then.
    pub(super) settle_dirty: bool,
    pub(super) vulnerable: VecDeque<(u64, u64)>,
    /// Vulnerable ranges whose reclaim waits for an upper-layer base write overlapping them
    /// (see `reclaim_got`): queued again when a base write completes.
    pub(super) vulnerable_after_base: Vec<(u64, u64)>,
    /// Some acknowledged data may have fewer than N copies on stores (see
    /// [`Superblock::degraded`]): wanted in the superblock, and what the last superblock write
    /// that completed holds (set when a store holding copies fails; a write is never
    /// acknowledged with fewer than N). It is cleared (checked at most every probe interval,
    /// once the vulnerable ranges are reclaimed) when no range in the map has fewer than N.
    pub(super) degraded: bool,
    pub(super) degraded_durable: bool,
    /// Off-loaded writes answered with fewer than N copies: their copies enter the range map
    /// (where reads can see them) only once "degraded" is durable, so that a restart cannot go
    /// on without the stores holding them and show older data after a read showed theirs.
    pub(super) held_writes: Vec<u64>,
    pub(super) degraded_check_at: Nanos,
    /// One superblock write at a time (the disk may complete concurrent writes in any
    /// order): the flag it carries, and whether the superblock changed since it was sent.
    pub(super) superblock_in_flight: Option<bool>,
    pub(super) superblock_dirty: bool,
    /// A superblock write the base volume failed is written again then.
    pub(super) superblock_retry_at: Option<Nanos>,
    /// Vulnerable ranges whose reclaim failed (its read, or its base write), queued again then.
    pub(super) vulnerable_retry: Vec<(u64, u64)>,
    pub(super) vulnerable_retry_at: Option<Nanos>,
    pub(super) next_reclaim_store: usize,
    pub(super) records: BTreeMap<u64, DelRecordInfo>,
    pub(super) next_slot: u64,
    pub(super) base_out: VecDeque<BaseOp>,
    pub(super) store_out: VecDeque<(StoreIdx, u64, Request)>,
    pub(super) upward_out: VecDeque<(u64, UpReply)>,
    pub(super) stats: Stats,
    pub(super) now: Nanos,
}

impl Client {
    pub(super) fn empty(
        config: Config,
        stores: Vec<StoreInfo>,
        phase: Phase,
        now: Nanos,
    ) -> Client {
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
            map: LocMap::new(),
            next_id: 1,
            outstanding: BTreeMap::new(),
            writes: FxHashMap::default(),
            reads: FxHashMap::default(),
            base_pending: FxHashMap::default(),
            base_in_flight: 0,
            external_base_load: 0,
            base_available: true,
            store_rank: BTreeMap::new(),
            queued_upward: VecDeque::new(),
            parked_reads: Vec::new(),
            reads_behind_failed_writes: Vec::new(),
            parked_writes: Vec::new(),
            stores_full_since: None,
            parked_retry_at: None,
            reclaim_jobs: 0,
            vulnerable_jobs: 0,
            reclaim_writes: FxHashMap::default(),
            local: FxHashMap::default(),
            local_disk: FxHashMap::default(),
            reclaiming: RangeMap::new(),
            settling: Vec::new(),
            settle_dirty: false,
            vulnerable: VecDeque::new(),
            vulnerable_after_base: Vec::new(),
            degraded: false,
            degraded_durable: false,
            held_writes: Vec::new(),
            degraded_check_at: now,
            superblock_in_flight: None,
            superblock_dirty: false,
            superblock_retry_at: None,
            vulnerable_retry: Vec::new(),
            vulnerable_retry_at: None,
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
}
