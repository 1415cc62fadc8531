//! The store core: a sans-I/O state machine over a circular log.
//!
//! # Driver contract
//!
//! ```text
//! let mut store = Store::format(config, store_id, seed)   // or Store::recover(config, seed)
//! loop {
//!     while let Some(op) = store.poll_disk()  { device.submit(op) }     // writes at any offset, flushes
//!     while let Some((id, reply)) = store.poll_reply() { send(id, reply) }
//!     wait for: a request → store.handle_request(now, id, request)
//!               a disk completion → store.handle_disk(now, done)
//!               store.poll_timeout() → store.handle_timeout(now)
//! }
//! ```
//!
//! Every public method is in this file, each `handle_*` ending with the bookkeeping checked
//! in debug builds (`check_invariants`); the work is in `requests.rs` (requests, appending
//! records), `completions.rs` (disk completions, acknowledgements, the tail), `clean.rs`
//! (cleaning and space) and `recovery.rs` (the scan at start).
//!
//! Guarantees: a write or delete is acknowledged only when its record and every earlier record
//! are durable (a flush issued after their writes completed); concurrent records are written
//! concurrently and flushes are shared (group commit). The index reflects durable records only,
//! so a record becomes stale (and the tail may pass it) only when what supersedes it is durable.
//! The head never passes the durable tail pointer.

mod api;
mod clean;
mod completions;
mod records;
mod recovery;
mod requests;

use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::format::{
    record_total_bytes, RecordHeader, RecordKind, Superblock, FENCES_MAX, HEADER_BYTES, LOG_OFFSET,
    PAYLOAD_BYTES_MAX, RECORD_ALIGN, SUPERBLOCK_SLOT_BYTES,
};
use crate::index::{ClientIndex, LiveDelta};
use records::Records;

pub use api::*;

pub use cordillera_types::Nanos;

/// The padding of a record is shorter than its alignment.
static ZEROS: [u8; RECORD_ALIGN as usize] = [0; RECORD_ALIGN as usize];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RecordState {
    Writing,
    Written,
    Durable,
}

#[derive(Clone, Copy, Debug)]
struct RecordInfo {
    position: u64,
    total_bytes: u64,
    header: RecordHeader,
    state: RecordState,
    live_bytes: u64,
    /// The request to acknowledge when durable.
    request: Option<u64>,
}

enum Phase {
    /// Writing the superblocks of a new store.
    Formatting,
    /// No valid superblock: the device holds no store, or a damaged one. Nothing is served.
    Failed,
    /// Reading the two superblock slots.
    Superblocks {
        pending: u32,
        best: Option<Superblock>,
    },
    /// Scanning the log from the tail.
    Scanning(Box<Scan>),
    Ready,
}

struct Scan {
    sb: Superblock,
    /// Log position of `buffer[cursor]`, the first byte not yet consumed.
    buffer_position: u64,
    buffer: Vec<u8>,
    cursor: usize,
    /// Bytes of the log consumed from the tail.
    consumed: u64,
    expected_seq: u64,
    expected_prev_epoch: u128,
    expected_epoch: Option<u128>,
    /// Reads in flight, in log order, with their data once it has arrived.
    reads: VecDeque<(u64, Option<Vec<u8>>)>,
    /// Log position of the next byte to read, and bytes asked for so far (at most one lap).
    next_read: u64,
    requested: u64,
    /// The chunk after `buffer`, while a record spanning the two is assembled in `buffer`:
    /// its bytes and the offset of the first not yet moved.
    spill: Option<(Vec<u8>, usize)>,
    /// Bytes of arriving data to drop: the rest of the lap after a wrap record.
    discard: u64,
    started: Nanos,
}

impl Scan {
    /// Makes at least `wanted` unconsumed bytes contiguous in `buffer`, moving as few as
    /// possible: a chunk becomes the buffer when nothing is left over, and otherwise only the
    /// bytes a spanning record needs are copied after the leftover. False until they arrive.
    fn make_available(&mut self, wanted: usize) -> bool {
        loop {
            let have = self.buffer.len() - self.cursor;
            if have >= wanted {
                return true;
            }
            if self.spill.is_none() {
                if !self.reads.front().is_some_and(|(_, d)| d.is_some()) {
                    return false;
                }
                let (_, data) = self.reads.pop_front().expect("an arrived read");
                let data = data.expect("arrived");
                let skip = self.discard.min(data.len() as u64);
                self.discard -= skip;
                self.spill = Some((data, skip as usize));
            }
            let (chunk, offset) = self.spill.as_mut().expect("a chunk");
            if have == 0 {
                // Nothing left over: the chunk becomes the buffer, without a copy.
                self.buffer = std::mem::take(chunk);
                self.cursor = *offset;
                self.spill = None;
                continue;
            }
            let take = (wanted - have).min(chunk.len() - *offset);
            self.buffer.drain(..self.cursor);
            self.cursor = 0;
            self.buffer
                .extend_from_slice(&chunk[*offset..*offset + take]);
            *offset += take;
            if *offset == chunk.len() {
                self.spill = None;
            }
        }
    }

    /// No more bytes will come: the whole lap has been read, and every read consumed.
    fn exhausted(&self, log_bytes: u64) -> bool {
        self.requested >= log_bytes && self.reads.is_empty() && self.spill.is_none()
    }

    /// Consumes `bytes` (the rest of the lap after a wrap record): from the buffer, the chunk
    /// after it, and data still to arrive.
    fn skip(&mut self, bytes: u64) {
        let held = (self.buffer.len() - self.cursor) as u64;
        if bytes <= held {
            self.cursor += bytes as usize;
            return;
        }
        let mut left = bytes - held;
        self.buffer.clear();
        self.cursor = 0;
        if let Some((chunk, offset)) = &mut self.spill {
            let skip = left.min((chunk.len() - *offset) as u64);
            *offset += skip as usize;
            left -= skip;
            if *offset == chunk.len() {
                self.spill = None;
            }
        }
        self.discard += left;
    }
}

/// Pending reads of a client request.
struct PendingRead {
    request: u64,
    pieces: Vec<(Extent, Option<Vec<u8>>)>,
    outstanding: usize,
    any: bool,
    /// A cleaning read of the live pieces of this record (no client request).
    clean: Option<u64>,
}

/// Records [`Store::check_invariants`] visits per event, on average, once the log holds more.
const CHECK_WALK_PER_EVENT: u64 = 64;

/// The store.
pub struct Store {
    config: Config,
    store_id: u128,
    phase: Phase,
    rng: u64,
    /// Records from the in-memory tail to the head, by sequence number.
    records: Records<RecordInfo>,
    /// Records the in-memory tail has passed that the durable tail pointer has not: (seq, bytes).
    passed: VecDeque<(u64, u64)>,
    indexes: FxHashMap<u64, ClientIndex>,
    /// Live data records per client, by sequence number (for read_any).
    live_by_client: FxHashMap<u64, BTreeSet<u64>>,
    /// Live records already offered by read_any, per client: concurrent read_any requests get
    /// different records (reclaim runs many in parallel) until every live record was offered.
    offered: FxHashMap<u64, BTreeSet<u64>>,
    head: u64,
    next_seq: u64,
    epoch: u128,
    last_epoch: u128,
    /// Bytes from the durable tail to the head.
    used_bytes: u64,
    durable: Superblock,
    superblock_in_flight: Option<Superblock>,
    superblock_flushing: Option<(u64, Superblock)>,
    /// Requests waiting for space (the tail pointer must be persisted first).
    waiting: VecDeque<(u64, Request)>,
    /// Reads held back while requests wait for space and the reads in flight keep the tail
    /// pointer from moving (a steady stream of reads would otherwise starve it).
    deferred_reads: VecDeque<(u64, Request)>,
    /// Metadata requests waiting for the records appended before them to be durable: (id,
    /// client, sequence number every earlier record is below, generation fenced).
    barriers: Vec<(u64, u64, u64, u64)>,
    /// Writes and deletes settled while their client's fence, raised since the durable
    /// superblock, is not yet durable: (id, client), answered `Done` once it is.
    held_done: Vec<(u64, u64)>,
    /// Each fenced client's lowest accepted generation, in force from the request that set it;
    /// the superblock makes it durable (`durable.fences`) before that request is answered.
    fences: BTreeMap<u64, u64>,
    /// After a recovery that found no record, this life's first epoch until a superblock naming
    /// it is durable: records are not acknowledged meanwhile (see `finish_recovery`). Kept as the
    /// epoch itself, not compared with `epoch`: records written meanwhile may wrap the log and
    /// start the next lap's epoch before the superblock lands.
    unrecorded_epoch: Option<u128>,
    /// Record writes in flight: id → (sequence number, written durably).
    io_records: FxHashMap<u64, (u64, bool)>,
    io_reads: FxHashMap<u64, (u64, usize)>,
    reads: FxHashMap<u64, PendingRead>,
    written_unflushed: Vec<u64>,
    flush_in_flight: Option<(u64, Vec<u64>)>,
    ack_cursor: u64,
    next_io: u64,
    next_read: u64,
    disk: VecDeque<DiskOp>,
    replies: VecDeque<(u64, Reply)>,
    last_activity: Nanos,
    stats: Stats,
    /// Sizes of the data records kept (size → count): the largest is the room cleaning needs
    /// to copy the tail record forward.
    data_sizes: BTreeMap<u64, u64>,
    /// What copying every live piece forward would take: Σ over data records of the size of a
    /// record holding their live bytes.
    live_cost: u64,
    /// Bytes of the records passed (Σ of `passed`), and of the records not yet applied (from
    /// `ack_cursor` on): kept as sums, as space checks run once per request.
    passed_total: u64,
    unapplied_bytes: u64,
    /// The record whose live pieces a cleaning read is fetching.
    cleaning: Option<u64>,
    /// Cleaning waits until its copies (sequence numbers below this) are applied.
    clean_until: u64,
    /// Events since the last full walk of [`Store::check_invariants`] (it is amortized).
    unchecked_events: Cell<u64>,
}

impl Store {
    fn empty(config: Config, store_id: u128, seed: u64) -> Store {
        Store {
            config,
            store_id,
            phase: Phase::Ready,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
            records: Records::default(),
            passed: VecDeque::new(),
            indexes: FxHashMap::default(),
            live_by_client: FxHashMap::default(),
            offered: FxHashMap::default(),
            head: 0,
            next_seq: 0,
            epoch: 0,
            last_epoch: 0,
            used_bytes: 0,
            durable: Superblock {
                store_id,
                generation: 0,
                log_bytes: config.log_bytes,
                tail: 0,
                tail_seq: 0,
                tail_epoch: 0,
                tail_prev_epoch: 0,
                fences: Vec::new(),
            },
            superblock_in_flight: None,
            superblock_flushing: None,
            waiting: VecDeque::new(),
            deferred_reads: VecDeque::new(),
            barriers: Vec::new(),
            held_done: Vec::new(),
            fences: BTreeMap::new(),
            unrecorded_epoch: None,
            io_records: FxHashMap::default(),
            io_reads: FxHashMap::default(),
            reads: FxHashMap::default(),
            written_unflushed: Vec::new(),
            flush_in_flight: None,
            ack_cursor: 0,
            next_io: 0,
            next_read: 0,
            disk: VecDeque::new(),
            replies: VecDeque::new(),
            last_activity: 0,
            stats: Stats::default(),
            data_sizes: BTreeMap::new(),
            live_cost: 0,
            passed_total: 0,
            unapplied_bytes: 0,
            cleaning: None,
            clean_until: 0,
            unchecked_events: Cell::new(0),
        }
    }

    /// A new, empty store: writes both superblock slots. `seed` drives the epoch identifiers.
    pub fn format(config: Config, store_id: u128, seed: u64) -> Store {
        let mut s = Store::empty(config, store_id, seed);
        s.epoch = s.random_epoch();
        s.last_epoch = s.epoch;
        let sb = Superblock {
            store_id,
            generation: 1,
            log_bytes: config.log_bytes,
            tail: 0,
            tail_seq: 0,
            tail_epoch: s.epoch,
            tail_prev_epoch: s.epoch,
            fences: Vec::new(),
        };
        // Slot 1 holds generation 1; slot 0 a copy at generation 0 so both are valid.
        let sb0 = Superblock {
            generation: 0,
            ..sb.clone()
        };
        s.write_superblock_now(sb0);
        s.write_superblock_now(sb.clone());
        s.durable = sb;
        s.phase = Phase::Formatting;
        s
    }

    /// Whether recovery found no valid superblock (the device holds no store, or a damaged one).
    pub fn failed(&self) -> bool {
        matches!(self.phase, Phase::Failed)
    }

    /// Recovers a store from its disk: reads the superblocks, scans the log from the tail, and
    /// rebuilds every client's index. Requests are refused (`Recovering`) until it is done.
    pub fn recover(config: Config, seed: u64, now: Nanos) -> Store {
        let mut s = Store::empty(config, 0, seed);
        s.phase = Phase::Superblocks {
            pending: 2,
            best: None,
        };
        for slot in 0..2 {
            let id = s.io_id();
            s.io_reads.insert(id, (u64::MAX, slot));
            s.disk.push_back(DiskOp::Read {
                id,
                offset_bytes: slot as u64 * SUPERBLOCK_SLOT_BYTES,
                length_bytes: SUPERBLOCK_SLOT_BYTES,
            });
        }
        s.last_activity = now;
        s.stats.recovery_ns = now;
        s
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready)
    }

    /// Requests accepted but not yet answered: records written or being written that are not
    /// acknowledged, and requests waiting for space. A store left alone answers all of them, so
    /// a quiet store with any left is stuck (the simulation tests check this).
    pub fn unanswered(&self) -> u64 {
        self.next_seq.saturating_sub(self.ack_cursor) + self.waiting.len() as u64
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn store_id(&self) -> u128 {
        self.store_id
    }

    /// A one-line summary of the log's state, for diagnostics.
    pub fn describe(&self) -> String {
        let oldest = self
            .records
            .iter()
            .next()
            .map_or(String::new(), |(seq, r)| {
                let h = r.header;
                format!(
                    "; oldest record {seq}: {:?} client {:#x} [{}, +{}) v{:x}, {} live bytes",
                    h.kind, h.client, h.offset_bytes, h.length_bytes, h.version, r.live_bytes
                )
            });
        format!(
            "head {} tail {} durable tail {} (seq {}) next seq {} ack cursor {} kept {} passed {} waiting {} reads {} (disk reads {}) superblock in flight {}; epoch unrecorded {}; at ack cursor {:?}; disk writes {} flush {:?} unflushed {}{oldest}",
            self.head,
            self.tail_position(),
            self.durable.tail,
            self.durable.tail_seq,
            self.next_seq,
            self.ack_cursor,
            self.records.len(),
            self.passed.len(),
            self.waiting.len(),
            self.reads.len(),
            self.io_reads.len(),
            self.superblock_in_flight.is_some(),
            self.unrecorded_epoch.is_some(),
            self.records.get(self.ack_cursor).map(|r| r.state),
            self.io_records.len(),
            self.flush_in_flight.as_ref().map(|(id, c)| (*id, c.len())),
            self.written_unflushed.len(),
        )
    }

    /// The largest data record kept (bytes, header and padding included): the most a
    /// `read_any` reply can hold.
    pub fn largest_record_bytes(&self) -> u64 {
        self.clean_room()
    }

    /// Bytes of the log in use, from the durable tail to the head.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    pub fn log_bytes(&self) -> u64 {
        self.config.log_bytes
    }

    /// The superblock last made durable.
    pub fn superblock(&self) -> &Superblock {
        &self.durable
    }

    /// The lowest generation of `client` the store accepts writes and deletes from (0: none
    /// fenced).
    pub fn fence(&self, client: u64) -> u64 {
        self.fences.get(&client).copied().unwrap_or(0)
    }

    /// Every client's valid ranges, by client.
    pub fn clients(&self) -> Vec<(u64, Vec<Extent>)> {
        let mut out: Vec<(u64, Vec<Extent>)> = self
            .indexes
            .iter()
            .filter(|(_, ix)| !ix.is_empty())
            .map(|(client, ix)| (*client, ix.ranges().map(|r| self.extent_of(r)).collect()))
            .collect();
        out.sort_by_key(|(client, _)| *client);
        out
    }

    fn io_id(&mut self) -> u64 {
        self.next_io += 1;
        self.next_io
    }

    fn random_epoch(&mut self) -> u128 {
        // SplitMix64 over the seed: epochs must differ between laps and stores, not be secret.
        let mut g = cordillera_types::SplitMix64(self.rng);
        let epoch = ((g.next_u64() as u128) << 64) | g.next_u64() as u128;
        self.rng = g.0;
        epoch
    }

    fn write_superblock_now(&mut self, sb: Superblock) {
        let id = self.io_id();
        self.disk.push_back(DiskOp::Write {
            id,
            offset_bytes: sb.slot() * SUPERBLOCK_SLOT_BYTES,
            data: sb.encode().into(),
            durable: false,
        });
        let flush = self.io_id();
        self.disk.push_back(DiskOp::Flush { id: flush });
        self.superblock_in_flight = Some(sb.clone());
        self.superblock_flushing = Some((flush, sb));
        let _ = id;
    }

    /// A request, answered later under `id` ([`Store::poll_reply`]); the work is in
    /// `requests.rs`.
    pub fn handle_request(&mut self, now: Nanos, id: u64, request: Request) {
        self.handle_request_step(now, id, request);
        self.check_invariants();
    }

    /// A disk operation completed; the work is in `completions.rs`.
    pub fn handle_disk(&mut self, now: Nanos, done: DiskDone) {
        self.handle_disk_step(now, done);
        self.check_invariants();
    }

    pub fn poll_disk(&mut self) -> Option<DiskOp> {
        self.start_flush();
        self.disk.pop_front()
    }

    pub fn poll_reply(&mut self) -> Option<(u64, Reply)> {
        self.replies.pop_front()
    }

    /// When the store wants `handle_timeout`: to write the tail pointer once idle.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        (self.is_ready()
            && self.superblock_in_flight.is_none()
            && self.tail_position() != self.durable.tail)
            .then_some(self.last_activity + self.config.tail_idle_ns)
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        self.handle_timeout_step(now);
        self.check_invariants();
    }

    fn handle_timeout_step(&mut self, now: Nanos) {
        let idle = self
            .records
            .values()
            .all(|r| r.state == RecordState::Durable)
            && self.reads.is_empty();
        if idle && now >= self.last_activity + self.config.tail_idle_ns {
            self.persist_tail();
        } else {
            self.last_activity = now;
        }
    }

    /// Checks the log's bookkeeping (under `debug_assertions`, while the log holds fewer than
    /// 4,096 records; every `handle_*` ends with it): the head never passes the durable tail
    /// (the bytes from the durable tail to the head fit in the log); those bytes are the
    /// records the tail passed and the records kept; the records kept lie end to end from the
    /// in-memory tail to the head, in sequence; acknowledged records are durable.
    ///
    /// The walk is amortized: after every event while the log holds at most
    /// [`CHECK_WALK_PER_EVENT`] records, otherwise once every `records / CHECK_WALK_PER_EVENT`
    /// events, so that it costs about that many record visits per event. Broken bookkeeping
    /// stays broken, so a later walk still finds it; the cheap bound on the head is checked
    /// after every event.
    fn check_invariants(&self) {
        if !cfg!(debug_assertions) || !matches!(self.phase, Phase::Ready) {
            return;
        }
        let log = self.config.log_bytes;
        assert!(
            self.used_bytes <= log,
            "the head passed the durable tail: {} bytes in use of {log}",
            self.used_bytes
        );
        let n = (self.records.len() + self.passed.len()) as u64;
        let since = self.unchecked_events.get() + 1;
        if n >= 4096 || since * CHECK_WALK_PER_EVENT < n {
            self.unchecked_events.set(since);
            return;
        }
        self.unchecked_events.set(0);
        let mut passed = 0;
        let mut seq = self.passed.front().map(|(s, _)| *s);
        for (s, b) in &self.passed {
            assert_eq!(Some(*s), seq, "passed records out of sequence");
            seq = Some(s + 1);
            passed += b;
        }
        assert_eq!(self.passed_total, passed, "the passed bytes' sum drifted");
        // One walk of the kept records: their sums and their order.
        let (mut kept, mut unapplied) = (0, 0);
        let mut at = None;
        for (s, r) in self.records.iter() {
            kept += r.total_bytes;
            assert!(
                seq.is_none_or(|q| q == s),
                "kept records out of sequence at {s}"
            );
            assert_eq!(
                r.header.seq, s,
                "a record filed under another sequence number"
            );
            if let Some(at) = at {
                assert_eq!(
                    r.position, at,
                    "record {s} does not follow the one before it"
                );
            }
            assert!(
                r.position + r.total_bytes <= log,
                "record {s} runs past the log's end"
            );
            if s < self.ack_cursor {
                assert!(
                    r.state == RecordState::Durable,
                    "record {s} acknowledged, not durable"
                );
            } else {
                unapplied += r.total_bytes;
            }
            seq = Some(s + 1);
            at = Some((r.position + r.total_bytes) % log);
        }
        assert_eq!(
            self.used_bytes,
            self.passed_bytes() + kept,
            "bytes in use are not the passed records and the kept ones"
        );
        assert_eq!(
            self.unapplied_bytes, unapplied,
            "the unapplied bytes' sum drifted"
        );
        if let Some(at) = at {
            assert_eq!(at, self.head, "the last record does not end at the head");
        }
        assert!(
            seq.is_none_or(|q| q == self.next_seq),
            "the next sequence number skips"
        );
    }

    /// The in-memory tail: the oldest record kept, or the head when none is.
    fn tail_position(&self) -> u64 {
        self.records
            .values()
            .next()
            .map_or(self.head, |r| r.position)
    }

    fn persist_tail(&mut self) {
        // Reads in flight may target records behind the tail: their space is not reused until
        // they are done.
        if self.superblock_in_flight.is_some() || !self.reads.is_empty() {
            return;
        }
        let (tail, tail_seq, tail_epoch, tail_prev_epoch) = match self.records.values().next() {
            Some(r) => (
                r.position,
                r.header.seq,
                r.header.epoch,
                r.header.prev_epoch,
            ),
            None => (self.head, self.next_seq, self.epoch, self.last_epoch),
        };
        if tail == self.durable.tail && tail_seq == self.durable.tail_seq {
            return;
        }
        let sb = Superblock {
            store_id: self.store_id,
            generation: self.durable.generation + 1,
            log_bytes: self.config.log_bytes,
            tail,
            tail_seq,
            tail_epoch,
            tail_prev_epoch,
            fences: self.fences.iter().map(|(&c, &g)| (c, g)).collect(),
        };
        self.write_superblock_now(sb);
    }

    /// Writes a superblock carrying fences set since the durable one (the tail as it is
    /// durable: this may run while reads keep the tail pointer from moving).
    pub(super) fn persist_fences(&mut self) {
        if self.superblock_in_flight.is_some() || !self.fences_pending() {
            return;
        }
        let sb = Superblock {
            generation: self.durable.generation + 1,
            fences: self.fences.iter().map(|(&c, &g)| (c, g)).collect(),
            ..self.durable.clone()
        };
        self.write_superblock_now(sb);
    }

    fn fences_pending(&self) -> bool {
        self.fences.len() != self.durable.fences.len()
            || self
                .fences
                .iter()
                .zip(&self.durable.fences)
                .any(|((c, g), (dc, dg))| c != dc || g != dg)
    }

    /// The generation the durable superblock fences `client` at.
    pub(super) fn durable_fence(&self, client: u64) -> u64 {
        self.durable
            .fences
            .binary_search_by_key(&client, |&(c, _)| c)
            .map_or(0, |i| self.durable.fences[i].1)
    }
}

/// The size of a record holding `live` bytes (none when nothing is live).
fn live_cost(live: u64) -> u64 {
    if live == 0 {
        0
    } else {
        record_total_bytes(live)
    }
}

/// `[start, end)` minus the ranges `holes`, as ordered pieces.
fn subtract(start: u64, end: u64, holes: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut pieces = vec![(start, end)];
    for &(hs, he) in holes {
        pieces = pieces
            .into_iter()
            .flat_map(|(s, e)| {
                if he <= s || e <= hs {
                    vec![(s, e)]
                } else {
                    [(s, hs.max(s)), (he.min(e), e)]
                        .into_iter()
                        .filter(|(a, b)| a < b)
                        .collect()
                }
            })
            .collect();
    }
    pieces
}
