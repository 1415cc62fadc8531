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
//! Guarantees: a write or delete is acknowledged only when its record and every earlier record
//! are durable (a flush issued after their writes completed); concurrent records are written
//! concurrently and flushes are shared (group commit). The index reflects durable records only,
//! so a record becomes stale (and the tail may pass it) only when what supersedes it is durable.
//! The head never passes the durable tail pointer.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::format::{
    record_total_bytes, RecordHeader, RecordKind, Superblock, HEADER_BYTES, LOG_OFFSET,
    PAYLOAD_BYTES_MAX, RECORD_ALIGN, SUPERBLOCK_SLOT_BYTES,
};
use crate::index::{ClientIndex, LiveDelta};

pub type Nanos = u64;

/// Store settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Size of the circular log (a multiple of 512).
    pub log_bytes: u64,
    /// Space kept free for delete records: writes are refused when less remains.
    pub reserve_bytes: u64,
    /// The tail pointer is written after the store has been idle this long.
    pub tail_idle_ns: Nanos,
    /// Bytes read per recovery read.
    pub scan_chunk_bytes: u64,
    /// Recovery reads kept in flight (the scan verifies one chunk while the next are read).
    pub scan_reads_ahead: usize,
    /// Ask for a durable write step (write + flush) for a record written while the store is
    /// otherwise idle, instead of a write and then a separate flush.
    pub durable_lone_writes: bool,
}

impl Config {
    pub fn new(log_bytes: u64) -> Config {
        assert!(
            log_bytes >= 4 * RECORD_ALIGN && log_bytes.is_multiple_of(RECORD_ALIGN),
            "log size"
        );
        Config {
            log_bytes,
            reserve_bytes: (log_bytes / 64).clamp(RECORD_ALIGN * 4, 16 << 20) / RECORD_ALIGN
                * RECORD_ALIGN,
            tail_idle_ns: 100_000_000,
            scan_chunk_bytes: 1 << 20,
            scan_reads_ahead: 2,
            durable_lone_writes: true,
        }
    }
}

/// What a client asks of the store.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    Write {
        client: u64,
        volume: u64,
        offset_bytes: u64,
        version: u64,
        data: Vec<u8>,
    },
    Read {
        client: u64,
        offset_bytes: u64,
        length_bytes: u64,
    },
    ReadAny {
        client: u64,
    },
    Delete {
        client: u64,
        volume: u64,
        offset_bytes: u64,
        length_bytes: u64,
        version: u64,
    },
    /// The client's valid ranges and versions (for client recovery, Everest §3.2.1). The
    /// client's requests still waiting for space are refused (`Full`), and the answer waits
    /// until every record appended before it is durable: a restarting client sees everything
    /// its previous incarnation got into the log, and nothing of it lands later.
    Metadata {
        client: u64,
    },
}

/// A valid range and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Extent {
    pub volume: u64,
    pub offset_bytes: u64,
    pub length_bytes: u64,
    pub version: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// The write or delete is durable.
    Done,
    /// The valid pieces of the range read, in order, with their data; gaps hold nothing here.
    Read(Vec<(Extent, Vec<u8>)>),
    /// A valid range of the client's oldest live record not yet offered by an earlier read_any
    /// (once all were, offering starts again from the oldest); `None` if the store holds
    /// nothing for the client.
    ReadAny(Option<(Extent, Vec<u8>)>),
    Metadata(Vec<Extent>),
    Error(StoreError),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum StoreError {
    #[error("the store is full: writes are refused until deletes free space")]
    Full,
    #[error("the store is formatting or recovering")]
    Recovering,
    #[error("no valid superblock: the device holds no store, or a damaged one")]
    NoStore,
    #[error("bad request: zero length, too large, or beyond the address space")]
    BadRequest,
}

/// A disk operation, on byte offsets of the store's file or device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskOp {
    Read {
        id: u64,
        offset_bytes: u64,
        length_bytes: u64,
    },
    Write {
        id: u64,
        offset_bytes: u64,
        data: WriteBytes,
        /// Complete only once durable: a write followed by a flush in the same step (the store
        /// asks for this when it is otherwise idle, saving a round trip for a lone write).
        durable: bool,
    },
    Flush {
        id: u64,
    },
}

/// What a write puts on the device, back to back: `head`, then `payload`, then `zeros` zero
/// bytes. A log record is its header, the request's payload as it arrived (moved, not copied:
/// at 64 KiB a copy is a measurable share of the store's CPU time) and its padding; every
/// other write is one buffer. Two are equal when their bytes are.
#[derive(Clone, Debug, Default)]
pub struct WriteBytes {
    head: Vec<u8>,
    payload: Vec<u8>,
    zeros: usize,
}

/// The padding of a record is shorter than its alignment.
static ZEROS: [u8; RECORD_ALIGN as usize] = [0; RECORD_ALIGN as usize];

impl WriteBytes {
    /// `head`, `payload` and `zeros` zero bytes (fewer than [`RECORD_ALIGN`]).
    pub fn record(head: Vec<u8>, payload: Vec<u8>, zeros: usize) -> WriteBytes {
        assert!(zeros < ZEROS.len(), "padding of {zeros} bytes");
        WriteBytes {
            head,
            payload,
            zeros,
        }
    }

    pub fn len(&self) -> usize {
        self.head.len() + self.payload.len() + self.zeros
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes in order, as slices for one vectored write (some may be empty).
    pub fn slices(&self) -> [&[u8]; 3] {
        [&self.head, &self.payload, &ZEROS[..self.zeros]]
    }

    /// The bytes as one buffer.
    pub fn into_vec(self) -> Vec<u8> {
        if self.payload.is_empty() && self.zeros == 0 {
            return self.head;
        }
        let mut out = Vec::with_capacity(self.len());
        for slice in self.slices() {
            out.extend_from_slice(slice);
        }
        out
    }
}

impl From<Vec<u8>> for WriteBytes {
    fn from(data: Vec<u8>) -> WriteBytes {
        WriteBytes {
            head: data,
            payload: Vec::new(),
            zeros: 0,
        }
    }
}

impl PartialEq for WriteBytes {
    fn eq(&self, other: &WriteBytes) -> bool {
        self.len() == other.len()
            && self
                .slices()
                .into_iter()
                .flatten()
                .eq(other.slices().into_iter().flatten())
    }
}

impl Eq for WriteBytes {}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskDone {
    Read { id: u64, data: Vec<u8> },
    Written { id: u64 },
    Flushed { id: u64 },
}

/// Counters for reports and load figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub records_scanned: u64,
    pub bytes_scanned: u64,
    pub valid_data_bytes: u64,
    pub recovery_ns: Nanos,
    pub requests_in_flight: u64,
    pub flushes: u64,
    /// Records written in this life (data, delete and wrap records).
    pub records_written: u64,
    /// Live records at the tail copied forward by cleaning, and the bytes copied.
    pub cleaned_records: u64,
    pub cleaned_bytes: u64,
    /// Deletes answered without a record: the store held nothing they remove.
    pub empty_deletes: u64,
    /// Writes refused because the log's valid data leaves no room.
    pub full_refusals: u64,
}

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
    Scanning(Scan),
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

/// The store.
pub struct Store {
    config: Config,
    store_id: u128,
    phase: Phase,
    rng: u64,
    /// Records from the in-memory tail to the head, by sequence number.
    records: BTreeMap<u64, RecordInfo>,
    /// Records the in-memory tail has passed that the durable tail pointer has not: (seq, bytes).
    passed: VecDeque<(u64, u64)>,
    indexes: HashMap<u64, ClientIndex>,
    /// Live data records per client, by sequence number (for read_any).
    live_by_client: HashMap<u64, BTreeSet<u64>>,
    /// Live records already offered by read_any, per client: concurrent read_any requests get
    /// different records (reclaim runs many in parallel) until every live record was offered.
    offered: HashMap<u64, BTreeSet<u64>>,
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
    /// client, sequence number every earlier record is below).
    barriers: Vec<(u64, u64, u64)>,
    /// After a recovery that found no record, this life's first epoch until a superblock naming
    /// it is durable: records are not acknowledged meanwhile (see `finish_recovery`). Kept as the
    /// epoch itself, not compared with `epoch`: records written meanwhile may wrap the log and
    /// start the next lap's epoch before the superblock lands.
    unrecorded_epoch: Option<u128>,
    /// Record writes in flight: id → (sequence number, written durably).
    io_records: HashMap<u64, (u64, bool)>,
    io_reads: HashMap<u64, (u64, usize)>,
    reads: HashMap<u64, PendingRead>,
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
    /// The record whose live pieces a cleaning read is fetching.
    cleaning: Option<u64>,
    /// Cleaning waits until its copies (sequence numbers below this) are applied.
    clean_until: u64,
}

impl Store {
    fn empty(config: Config, store_id: u128, seed: u64) -> Store {
        Store {
            config,
            store_id,
            phase: Phase::Ready,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
            records: BTreeMap::new(),
            passed: VecDeque::new(),
            indexes: HashMap::new(),
            live_by_client: HashMap::new(),
            offered: HashMap::new(),
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
            },
            superblock_in_flight: None,
            superblock_flushing: None,
            waiting: VecDeque::new(),
            deferred_reads: VecDeque::new(),
            barriers: Vec::new(),
            unrecorded_epoch: None,
            io_records: HashMap::new(),
            io_reads: HashMap::new(),
            reads: HashMap::new(),
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
            cleaning: None,
            clean_until: 0,
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
        };
        // Slot 1 holds generation 1; slot 0 a copy at generation 0 so both are valid.
        let sb0 = Superblock {
            generation: 0,
            ..sb
        };
        s.write_superblock_now(sb0);
        s.write_superblock_now(sb);
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
            self.records.get(&self.ack_cursor).map(|r| r.state),
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
    pub fn superblock(&self) -> Superblock {
        self.durable
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
        let mut next = || {
            // SplitMix64 over the seed: epochs must differ between laps and stores, not be secret.
            self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        ((next() as u128) << 64) | next() as u128
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
        self.superblock_in_flight = Some(sb);
        self.superblock_flushing = Some((flush, sb));
        let _ = id;
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
        };
        self.write_superblock_now(sb);
    }

    pub fn handle_request(&mut self, now: Nanos, id: u64, request: Request) {
        self.last_activity = now;
        if !self.is_ready() {
            let error = if self.failed() {
                StoreError::NoStore
            } else {
                StoreError::Recovering
            };
            self.replies.push_back((id, Reply::Error(error)));
            return;
        }
        match request {
            Request::Write { .. } | Request::Delete { .. } => {
                if self.waiting.is_empty() {
                    if let Some(wait) = self.append(id, request) {
                        self.waiting.push_back(wait);
                        self.persist_tail();
                    }
                } else {
                    self.waiting.push_back((id, request));
                    self.drain_waiting();
                }
                self.clean();
            }
            Request::Read { .. } | Request::ReadAny { .. }
                if !self.waiting.is_empty()
                    && !self.reads.is_empty()
                    && self.tail_position() != self.durable.tail =>
            {
                self.deferred_reads.push_back((id, request));
            }
            Request::Read {
                client,
                offset_bytes,
                length_bytes,
            } => {
                let Some(end) = offset_bytes.checked_add(length_bytes) else {
                    self.replies
                        .push_back((id, Reply::Error(StoreError::BadRequest)));
                    return;
                };
                let ranges = self
                    .indexes
                    .get(&client)
                    .map(|ix| ix.lookup(offset_bytes, end))
                    .unwrap_or_default();
                self.start_read(id, ranges, false);
            }
            Request::ReadAny { client } => {
                // The oldest live record not yet offered; once all were, offering starts over.
                let offered = self.offered.entry(client).or_default();
                let live = self.live_by_client.get(&client);
                let mut pick = live.and_then(|s| s.iter().find(|seq| !offered.contains(seq)));
                if pick.is_none() {
                    offered.clear();
                    pick = live.and_then(|s| s.iter().next());
                }
                let range = pick.and_then(|&seq| {
                    offered.insert(seq);
                    let h = self.records.get(&seq)?.header;
                    self.indexes
                        .get(&client)?
                        .lookup(h.offset_bytes, h.offset_bytes + h.length_bytes)
                        .into_iter()
                        .find(|r| r.record == seq)
                });
                self.start_read(id, range.into_iter().collect(), true);
            }
            Request::Metadata { client } => {
                let waiting = std::mem::take(&mut self.waiting);
                for (wid, request) in waiting {
                    let theirs = match &request {
                        Request::Write { client: c, .. } | Request::Delete { client: c, .. } => {
                            *c == client
                        }
                        _ => false,
                    };
                    if theirs {
                        self.replies
                            .push_back((wid, Reply::Error(StoreError::Full)));
                    } else {
                        self.waiting.push_back((wid, request));
                    }
                }
                self.barriers.push((id, client, self.next_seq));
                self.drain_waiting();
            }
        }
    }

    /// Answers the metadata requests whose earlier writes and deletes are all settled.
    fn answer_barriers(&mut self) {
        let mut i = 0;
        while i < self.barriers.len() {
            if self.ack_cursor < self.barriers[i].2 {
                i += 1;
                continue;
            }
            let (id, client, _) = self.barriers.remove(i);
            let extents = self
                .indexes
                .get(&client)
                .map(|ix| ix.ranges().map(|r| self.extent_of(r)).collect())
                .unwrap_or_default();
            self.replies.push_back((id, Reply::Metadata(extents)));
        }
    }

    fn extent_of(&self, r: crate::index::Range) -> Extent {
        let volume = self.records.get(&r.record).map_or(0, |i| i.header.volume);
        Extent {
            volume,
            offset_bytes: r.start,
            length_bytes: r.end - r.start,
            version: r.version,
        }
    }

    fn start_read(&mut self, request: u64, ranges: Vec<crate::index::Range>, any: bool) {
        self.start_pieces(request, ranges, any, None);
    }

    fn start_pieces(
        &mut self,
        request: u64,
        ranges: Vec<crate::index::Range>,
        any: bool,
        clean: Option<u64>,
    ) {
        if ranges.is_empty() {
            self.replies.push_back((
                request,
                if any {
                    Reply::ReadAny(None)
                } else {
                    Reply::Read(Vec::new())
                },
            ));
            return;
        }
        let key = self.next_read;
        self.next_read += 1;
        let mut pieces = Vec::new();
        for (i, r) in ranges.iter().enumerate() {
            let info = self.records[&r.record];
            let within = r.start - info.header.offset_bytes;
            let id = self.io_id();
            self.io_reads.insert(id, (key, i));
            self.disk.push_back(DiskOp::Read {
                id,
                offset_bytes: LOG_OFFSET + info.position + HEADER_BYTES as u64 + within,
                length_bytes: r.end - r.start,
            });
            pieces.push((self.extent_of(*r), None));
        }
        let outstanding = pieces.len();
        self.reads.insert(
            key,
            PendingRead {
                request,
                pieces,
                outstanding,
                any,
                clean,
            },
        );
    }

    /// Free bytes between the head and the durable tail.
    fn free_bytes(&self) -> u64 {
        self.config.log_bytes - self.used_bytes
    }

    /// The room cleaning needs to copy any kept data record forward: writes and deletes leave
    /// it free, so that space pressure can always move the tail.
    fn clean_room(&self) -> u64 {
        self.data_sizes.keys().next_back().copied().unwrap_or(0)
    }

    /// Bytes the tail passed that a durable tail pointer gives back.
    fn passed_bytes(&self) -> u64 {
        self.passed.iter().map(|(_, b)| b).sum()
    }

    /// Garbage ahead of the tail that cleaning can give back: bytes kept that neither hold live
    /// data nor belong to records not yet applied.
    fn cleanable_bytes(&self) -> u64 {
        let unapplied: u64 = self
            .records
            .range(self.ack_cursor..)
            .map(|(_, r)| r.total_bytes)
            .sum();
        self.used_bytes
            .saturating_sub(self.passed_bytes() + self.live_cost + unapplied)
    }

    /// Cleaning is worth a pass only when it gives back at least this much (less is churn).
    fn clean_threshold(&self) -> u64 {
        (self.config.reserve_bytes / 2).max(2 * RECORD_ALIGN)
    }

    /// Whether space runs short: requests wait for it, or writes would soon be refused.
    fn space_short(&self) -> bool {
        !self.waiting.is_empty()
            || self.free_bytes() < 2 * self.config.reserve_bytes + self.clean_room()
    }

    /// Copies the live pieces of the tail record forward when space runs short and the log
    /// holds garbage, so the tail can pass it (Everest's stores are logs: a record still
    /// holding a few live bytes would otherwise pin the whole log behind it). The copies keep
    /// client, volume, range and version; a copy replaces its source in the index (an equal
    /// version from a later record wins), so reads, deletes and recovery see the same data.
    /// When cleaning cannot make room, waiting writes are refused (`Full`).
    fn clean(&mut self) {
        if !self.is_ready() || self.cleaning.is_some() || self.ack_cursor < self.clean_until {
            return;
        }
        if !self.space_short() {
            return;
        }
        if !self.passed.is_empty() {
            self.persist_tail();
        }
        let Some((&seq, info)) = self.records.iter().next() else {
            return;
        };
        if seq >= self.ack_cursor {
            return; // the log is all in flight: it drains by itself
        }
        debug_assert!(info.header.kind == RecordKind::Data && info.live_bytes > 0);
        if self.cleanable_bytes() < self.clean_threshold() {
            self.refuse_waiting_writes();
            return;
        }
        let h = info.header;
        let ranges: Vec<crate::index::Range> = self
            .indexes
            .get(&h.client)
            .map(|ix| ix.lookup(h.offset_bytes, h.offset_bytes + h.length_bytes))
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.record == seq)
            .collect();
        if ranges.is_empty() {
            return;
        }
        self.cleaning = Some(seq);
        self.start_pieces(u64::MAX, ranges, false, Some(seq));
    }

    /// Space cannot come back for writes: the waiting ones are refused (deletes keep waiting,
    /// as reclaim must always make progress).
    fn refuse_waiting_writes(&mut self) {
        if self.superblock_in_flight.is_some() || !self.passed.is_empty() {
            return; // space still comes back
        }
        let waiting = std::mem::take(&mut self.waiting);
        for (id, request) in waiting {
            if matches!(request, Request::Write { .. }) {
                self.stats.full_refusals += 1;
                self.replies.push_back((id, Reply::Error(StoreError::Full)));
            } else {
                self.waiting.push_back((id, request));
            }
        }
    }

    /// The cleaning read of record `source` is back: appends copies of the pieces still live
    /// in it. Pieces that a record not yet applied overlaps stay (that record may remove
    /// them; a copy appended after it would bring them back).
    fn finish_clean(&mut self, source: u64, pieces: Vec<(Extent, Vec<u8>)>) {
        self.cleaning = None;
        let Some(info) = self.records.get(&source).copied() else {
            return;
        };
        let h = info.header;
        let Some(ix) = self.indexes.get(&h.client) else {
            return;
        };
        let live: Vec<crate::index::Range> = ix
            .lookup(h.offset_bytes, h.offset_bytes + h.length_bytes)
            .into_iter()
            .filter(|r| r.record == source)
            .collect();
        let busy: Vec<(u64, u64)> = self
            .records
            .range(self.ack_cursor..)
            .map(|(_, r)| r.header)
            .filter(|o| o.client == h.client && o.kind != RecordKind::Wrap)
            .map(|o| (o.offset_bytes, o.offset_bytes + o.length_bytes))
            .collect();
        let mut copies: Vec<(u64, u64, u64, &[u8])> = Vec::new();
        for r in &live {
            for (start, end) in subtract(r.start, r.end, &busy) {
                // Bytes only ever leave a record, so a live piece lies within one read.
                let Some((e, data)) = pieces.iter().find(|(e, _)| {
                    e.offset_bytes <= start && end <= e.offset_bytes + e.length_bytes
                }) else {
                    continue;
                };
                let at = (start - e.offset_bytes) as usize;
                copies.push((
                    start,
                    end,
                    r.version,
                    &data[at..at + (end - start) as usize],
                ));
            }
        }
        // All copies or none: the source passes only when every live piece has moved.
        let mut head = self.head;
        let mut need = 0;
        for (start, end, _, _) in &copies {
            let total = record_total_bytes(end - start);
            if head + total > self.config.log_bytes {
                need += self.config.log_bytes - head;
                head = 0;
            }
            need += total;
            head += total;
        }
        if copies.is_empty() || need > self.free_bytes() {
            if need > self.free_bytes() {
                self.refuse_waiting_writes();
            }
            return;
        }
        let copies: Vec<(u64, u64, u64, Vec<u8>)> = copies
            .into_iter()
            .map(|(s, e, v, d)| (s, e, v, d.to_vec()))
            .collect();
        for (start, end, version, data) in copies {
            let total = record_total_bytes(end - start);
            if self.head + total > self.config.log_bytes {
                let filler = self.config.log_bytes - self.head;
                self.push_record(RecordKind::Wrap, 0, 0, 0, 0, 0, Vec::new(), filler, None);
            }
            self.push_record(
                RecordKind::Data,
                h.client,
                h.volume,
                start,
                end - start,
                version,
                data,
                total,
                None,
            );
            self.stats.cleaned_bytes += end - start;
        }
        self.stats.cleaned_records += 1;
        self.clean_until = self.next_seq;
    }

    /// Retries requests waiting for space. Deletes commute with one another, so a delete may
    /// pass waiting deletes, but never a waiting write (it may be what the delete removes).
    /// Writes may pass anything: a client never writes a version at or below one it has asked
    /// to delete.
    fn drain_waiting(&mut self) {
        let waiting = std::mem::take(&mut self.waiting);
        let mut write_waits = false;
        for (id, request) in waiting {
            let is_write = matches!(request, Request::Write { .. });
            if !is_write && write_waits {
                self.waiting.push_back((id, request));
                continue;
            }
            if let Some(wait) = self.append(id, request) {
                write_waits |= is_write;
                self.waiting.push_back(wait);
            }
        }
        if !self.waiting.is_empty() {
            self.persist_tail();
        }
        self.answer_barriers();
        self.clean();
    }

    /// Whether a delete removes live bytes of the oldest record, bringing the moment the tail
    /// can pass it closer: such deletes may use the last of the reserve, so that reclaim (which
    /// deletes in log order) can always make room.
    fn shrinks_tail(&self, client: u64, start: u64, end: u64, version: u64) -> bool {
        let Some((&seq, info)) = self.records.iter().next() else {
            return false;
        };
        let h = info.header;
        if h.kind != RecordKind::Data || h.client != client {
            return false;
        }
        self.indexes.get(&client).is_some_and(|ix| {
            ix.lookup(h.offset_bytes, h.offset_bytes + h.length_bytes)
                .iter()
                .filter(|r| r.record == seq)
                .any(|r| r.start < end && start < r.end && r.version <= version)
        })
    }

    /// Whether a delete of versions ≤ `version` in `[start, end)` would remove nothing: the
    /// index holds no such version there and no record of the client not yet applied overlaps
    /// it. Such a delete needs no record (recovery replays the same records to the same index).
    fn removes_nothing(&self, client: u64, start: u64, end: u64, version: u64) -> bool {
        let held = self
            .indexes
            .get(&client)
            .is_some_and(|ix| ix.lookup(start, end).iter().any(|r| r.version <= version));
        let pending = self.records.range(self.ack_cursor..).any(|(_, r)| {
            let o = r.header;
            o.kind != RecordKind::Wrap
                && o.client == client
                && o.offset_bytes < end
                && start < o.offset_bytes + o.length_bytes
        });
        !held && !pending
    }

    /// Appends the record of a write or delete, or refuses it, or gives it back to wait for
    /// space (the tail pointer must move first).
    fn append(&mut self, id: u64, request: Request) -> Option<(u64, Request)> {
        let (kind, offset_bytes, length_bytes, payload_bytes) = match &request {
            Request::Write {
                offset_bytes, data, ..
            } => (
                RecordKind::Data,
                *offset_bytes,
                data.len() as u64,
                data.len() as u64,
            ),
            Request::Delete {
                offset_bytes,
                length_bytes,
                ..
            } => (RecordKind::Delete, *offset_bytes, *length_bytes, 0),
            _ => unreachable!("only writes and deletes append"),
        };
        let total = record_total_bytes(payload_bytes);
        let bad = length_bytes == 0
            || payload_bytes > PAYLOAD_BYTES_MAX as u64
            || offset_bytes.checked_add(length_bytes).is_none()
            || total + self.config.reserve_bytes > self.config.log_bytes;
        if bad {
            self.replies
                .push_back((id, Reply::Error(StoreError::BadRequest)));
            return None;
        }
        if let Request::Delete {
            client, version, ..
        } = &request
        {
            if self.removes_nothing(*client, offset_bytes, offset_bytes + length_bytes, *version) {
                self.stats.empty_deletes += 1;
                self.replies.push_back((id, Reply::Done));
                return None;
            }
        }
        let filler = if self.head + total > self.config.log_bytes {
            self.config.log_bytes - self.head
        } else {
            0
        };
        let need = total + filler;
        // Writes leave the reserve to deletes; deletes leave its last quarter to deletes that
        // free the tail record. Both leave cleaning the room to copy the tail forward.
        let reserve = match &request {
            Request::Write { .. } => self.config.reserve_bytes + self.clean_room().max(total),
            Request::Delete {
                client,
                offset_bytes,
                length_bytes,
                version,
                ..
            } => {
                if self.shrinks_tail(
                    *client,
                    *offset_bytes,
                    offset_bytes + length_bytes,
                    *version,
                ) {
                    0
                } else {
                    self.config.reserve_bytes / 4 / RECORD_ALIGN * RECORD_ALIGN + self.clean_room()
                }
            }
            _ => unreachable!("only writes and deletes append"),
        };
        if need + reserve > self.free_bytes() {
            let cleanable = self.cleanable_bytes();
            let space_will_come = need + reserve <= self.free_bytes() + self.passed_bytes()
                || self.superblock_in_flight.is_some()
                || (cleanable >= self.clean_threshold()
                    && need + reserve <= self.free_bytes() + cleanable);
            if space_will_come || kind == RecordKind::Delete {
                // Space comes back once the tail pointer is durable; deletes always wait rather
                // than fail, so reclaim always makes progress.
                return Some((id, request));
            }
            self.stats.full_refusals += 1;
            self.replies.push_back((id, Reply::Error(StoreError::Full)));
            return None;
        }
        if filler > 0 {
            self.push_record(RecordKind::Wrap, 0, 0, 0, 0, 0, Vec::new(), filler, None);
        }
        match request {
            Request::Write {
                client,
                volume,
                offset_bytes,
                version,
                data,
            } => {
                self.push_record(
                    kind,
                    client,
                    volume,
                    offset_bytes,
                    length_bytes,
                    version,
                    data,
                    total,
                    Some(id),
                );
            }
            Request::Delete {
                client,
                volume,
                offset_bytes,
                length_bytes,
                version,
            } => {
                self.push_record(
                    kind,
                    client,
                    volume,
                    offset_bytes,
                    length_bytes,
                    version,
                    Vec::new(),
                    total,
                    Some(id),
                );
            }
            _ => unreachable!("only writes and deletes append"),
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    fn push_record(
        &mut self,
        kind: RecordKind,
        client: u64,
        volume: u64,
        offset_bytes: u64,
        length_bytes: u64,
        version: u64,
        payload: Vec<u8>,
        total: u64,
        request: Option<u64>,
    ) {
        debug_assert!(self.head + total <= self.config.log_bytes);
        let header = RecordHeader {
            kind,
            seq: self.next_seq,
            client,
            volume,
            offset_bytes,
            length_bytes,
            version,
            payload_bytes: payload.len() as u32,
            total_bytes: total as u32,
            epoch: self.epoch,
            prev_epoch: self.last_epoch,
        };
        let (head, zeros) = header.encode_header(&payload);
        let bytes = WriteBytes::record(head, payload, zeros);
        let id = self.io_id();
        // A record written while nothing else is being written or waiting for a flush is made
        // durable by its own write step; under concurrency, flushes are shared instead.
        let durable = self.config.durable_lone_writes
            && self.io_records.is_empty()
            && self.written_unflushed.is_empty()
            && self.flush_in_flight.is_none();
        self.io_records.insert(id, (header.seq, durable));
        self.disk.push_back(DiskOp::Write {
            id,
            offset_bytes: LOG_OFFSET + self.head,
            data: bytes,
            durable,
        });
        self.records.insert(
            header.seq,
            RecordInfo {
                position: self.head,
                total_bytes: total,
                header,
                state: RecordState::Writing,
                live_bytes: 0,
                request,
            },
        );
        if kind == RecordKind::Data {
            *self.data_sizes.entry(total).or_default() += 1;
        }
        self.stats.requests_in_flight += request.is_some() as u64;
        self.stats.records_written += 1;
        self.next_seq += 1;
        self.last_epoch = self.epoch;
        self.used_bytes += total;
        self.head += total;
        if self.head == self.config.log_bytes {
            self.head = 0;
            self.epoch = self.random_epoch();
        }
    }

    pub fn handle_disk(&mut self, now: Nanos, done: DiskDone) {
        self.last_activity = now;
        match done {
            DiskDone::Written { id } => {
                if let Some((seq, durable)) = self.io_records.remove(&id) {
                    let r = self.records.get_mut(&seq).expect("record being written");
                    if durable {
                        r.state = RecordState::Durable;
                        self.stats.flushes += 1;
                        self.acknowledge();
                    } else {
                        r.state = RecordState::Written;
                        self.written_unflushed.push(seq);
                    }
                }
            }
            DiskDone::Flushed { id } => {
                if self.superblock_flushing.is_some_and(|(f, _)| f == id) {
                    let (_, sb) = self.superblock_flushing.take().expect("superblock flush");
                    if matches!(self.phase, Phase::Formatting) {
                        self.phase = Phase::Ready;
                    }
                    self.superblock_durable(sb);
                } else if self.flush_in_flight.as_ref().is_some_and(|(f, _)| *f == id) {
                    let (_, covered) = self.flush_in_flight.take().expect("flush");
                    self.stats.flushes += 1;
                    for seq in covered {
                        self.records.get_mut(&seq).expect("flushed record").state =
                            RecordState::Durable;
                    }
                    self.acknowledge();
                }
            }
            DiskDone::Read { id, data } => {
                if let Some((key, index)) = self.io_reads.remove(&id) {
                    if key == u64::MAX {
                        self.superblock_read(now, data);
                    } else if key == u64::MAX - 1 {
                        self.scan_read(now, id, data);
                    } else {
                        self.piece_read(key, index, data);
                    }
                }
            }
        }
    }

    /// Group commit: one flush at a time covers every record whose write completed before it
    /// was issued. Called when the driver polls, so that writes completing together (a merged
    /// transfer) share one flush.
    fn start_flush(&mut self) {
        if self.flush_in_flight.is_some() || self.written_unflushed.is_empty() {
            return;
        }
        let id = self.io_id();
        let covered = std::mem::take(&mut self.written_unflushed);
        self.flush_in_flight = Some((id, covered));
        self.disk.push_back(DiskOp::Flush { id });
    }

    /// Acknowledges durable records in log order, applies them to the index, and moves the tail
    /// over stale records.
    fn acknowledge(&mut self) {
        if self.unrecorded_epoch.is_some() {
            return;
        }
        while let Some(info) = self.records.get(&self.ack_cursor).copied() {
            if info.state != RecordState::Durable {
                break;
            }
            self.apply(info.header);
            if let Some(request) = info.request {
                self.replies.push_back((request, Reply::Done));
                self.stats.requests_in_flight -= 1;
            }
            self.ack_cursor += 1;
        }
        self.advance_tail();
        self.answer_barriers();
        self.clean();
    }

    /// Applies a durable record to its client's index.
    fn apply(&mut self, h: RecordHeader) {
        let deltas = match h.kind {
            RecordKind::Data => self.indexes.entry(h.client).or_default().write(
                h.offset_bytes,
                h.offset_bytes + h.length_bytes,
                h.version,
                h.seq,
            ),
            RecordKind::Delete => self.indexes.entry(h.client).or_default().delete(
                h.offset_bytes,
                h.offset_bytes + h.length_bytes,
                h.version,
            ),
            RecordKind::Wrap => Vec::new(),
        };
        for LiveDelta { record, bytes } in deltas {
            let info = self
                .records
                .get_mut(&record)
                .expect("index names a kept record");
            let before = info.live_bytes;
            info.live_bytes = (info.live_bytes as i64 + bytes) as u64;
            self.live_cost = self.live_cost - live_cost(before) + live_cost(info.live_bytes);
            let set = self.live_by_client.entry(info.header.client).or_default();
            if info.live_bytes > 0 {
                set.insert(record);
            } else {
                set.remove(&record);
                if let Some(offered) = self.offered.get_mut(&info.header.client) {
                    offered.remove(&record);
                }
            }
        }
    }

    fn advance_tail(&mut self) {
        while let Some((seq, info)) = self.records.iter().next().map(|(s, i)| (*s, *i)) {
            let stale = seq < self.ack_cursor
                && (info.header.kind != RecordKind::Data || info.live_bytes == 0);
            if !stale {
                break;
            }
            self.passed.push_back((seq, info.total_bytes));
            self.records.remove(&seq);
            if info.header.kind == RecordKind::Data {
                let count = self
                    .data_sizes
                    .get_mut(&info.total_bytes)
                    .expect("a kept data record's size");
                *count -= 1;
                if *count == 0 {
                    self.data_sizes.remove(&info.total_bytes);
                }
            }
        }
    }

    fn superblock_durable(&mut self, sb: Superblock) {
        self.superblock_in_flight = None;
        if self.unrecorded_epoch == Some(sb.tail_epoch) {
            self.unrecorded_epoch = None;
            self.acknowledge();
        }
        while self
            .passed
            .front()
            .is_some_and(|(seq, _)| *seq < sb.tail_seq)
        {
            let (_, bytes) = self.passed.pop_front().expect("passed record");
            self.used_bytes -= bytes;
        }
        if sb.generation > self.durable.generation {
            self.durable = sb;
        }
        // Space may have come back.
        self.drain_waiting();
        let deferred = std::mem::take(&mut self.deferred_reads);
        for (id, request) in deferred {
            self.handle_request(self.last_activity, id, request);
        }
    }

    fn piece_read(&mut self, key: u64, index: usize, data: Vec<u8>) {
        let pending = self.reads.get_mut(&key).expect("read");
        pending.pieces[index].1 = Some(data);
        pending.outstanding -= 1;
        if pending.outstanding > 0 {
            return;
        }
        let pending = self.reads.remove(&key).expect("read");
        let pieces: Vec<(Extent, Vec<u8>)> = pending
            .pieces
            .into_iter()
            .map(|(e, d)| (e, d.expect("piece read")))
            .collect();
        if let Some(source) = pending.clean {
            self.finish_clean(source, pieces);
            if self.reads.is_empty() && !self.waiting.is_empty() {
                self.persist_tail();
            }
            return;
        }
        let reply = if pending.any {
            Reply::ReadAny(pieces.into_iter().next())
        } else {
            Reply::Read(pieces)
        };
        self.replies.push_back((pending.request, reply));
        if self.reads.is_empty() && !self.waiting.is_empty() {
            self.persist_tail();
        }
    }

    // -----------------------------------------------------------------------------------------
    // Recovery

    fn superblock_read(&mut self, now: Nanos, data: Vec<u8>) {
        let Phase::Superblocks { pending, best } = &mut self.phase else {
            return;
        };
        *pending -= 1;
        if let Ok(sb) = Superblock::decode(&data) {
            if best.is_none_or(|b| sb.generation > b.generation) {
                *best = Some(sb);
            }
        }
        if *pending > 0 {
            return;
        }
        let Some(sb) = *best else {
            // Never reformat implicitly: that would discard a damaged store's records.
            self.phase = Phase::Failed;
            return;
        };
        self.store_id = sb.store_id;
        self.durable = sb;
        self.config.log_bytes = sb.log_bytes;
        self.phase = Phase::Scanning(Scan {
            sb,
            buffer_position: sb.tail,
            buffer: Vec::new(),
            cursor: 0,
            consumed: 0,
            expected_seq: sb.tail_seq,
            expected_prev_epoch: sb.tail_prev_epoch,
            expected_epoch: Some(sb.tail_epoch),
            reads: VecDeque::new(),
            next_read: sb.tail,
            requested: 0,
            spill: None,
            discard: 0,
            started: now,
        });
        self.request_scan_reads();
        self.scan_next(now);
    }

    /// Keeps `scan_reads_ahead` reads of the log in flight, in order from the tail, wrapping
    /// at the end of the log, never more than one lap.
    fn request_scan_reads(&mut self) {
        let Phase::Scanning(scan) = &mut self.phase else {
            return;
        };
        let log_bytes = self.config.log_bytes;
        while scan.reads.len() < self.config.scan_reads_ahead.max(1) && scan.requested < log_bytes {
            let length = self
                .config
                .scan_chunk_bytes
                .min(log_bytes - scan.next_read)
                .min(log_bytes - scan.requested);
            let id = self.next_io + 1;
            self.next_io = id;
            self.io_reads.insert(id, (u64::MAX - 1, 0));
            self.disk.push_back(DiskOp::Read {
                id,
                offset_bytes: LOG_OFFSET + scan.next_read,
                length_bytes: length,
            });
            scan.reads.push_back((id, None));
            scan.requested += length;
            scan.next_read = (scan.next_read + length) % log_bytes;
        }
    }

    fn scan_read(&mut self, now: Nanos, id: u64, data: Vec<u8>) {
        let Phase::Scanning(scan) = &mut self.phase else {
            return;
        };
        if let Some(slot) = scan.reads.iter_mut().find(|(i, _)| *i == id) {
            slot.1 = Some(data);
        }
        if scan.reads.front().is_some_and(|(_, d)| d.is_some()) {
            self.scan_next(now);
            self.request_scan_reads();
        }
    }

    /// Parses records from the scan buffer; asks for more bytes or finishes.
    fn scan_next(&mut self, now: Nanos) {
        loop {
            let log_bytes = self.config.log_bytes;
            let Phase::Scanning(scan) = &mut self.phase else {
                return;
            };
            if scan.consumed >= log_bytes {
                break;
            }
            // A record never crosses the end of the log.
            let room = log_bytes - scan.buffer_position;
            if room < HEADER_BYTES as u64 {
                break;
            }
            if !scan.make_available(HEADER_BYTES) {
                if scan.exhausted(log_bytes) {
                    break;
                }
                return; // until more of the log has been read
            }
            let at = scan.cursor;
            let Ok(h) = RecordHeader::decode(&scan.buffer[at..at + HEADER_BYTES]) else {
                break;
            };
            // The chain: consecutive sequence numbers, each record naming its predecessor's epoch.
            // A new epoch starts at every wrap and after every recovery, so bytes left past the
            // head by an earlier lap or an earlier life never chain on.
            let chained = h.seq == scan.expected_seq
                && h.prev_epoch == scan.expected_prev_epoch
                && scan.expected_epoch.is_none_or(|e| h.epoch == e)
                && if h.kind == RecordKind::Wrap {
                    scan.buffer_position + h.total_bytes as u64 == log_bytes
                } else {
                    scan.buffer_position + h.total_bytes as u64 <= log_bytes
                };
            if !chained {
                break;
            }
            let need = if h.kind == RecordKind::Wrap {
                RECORD_ALIGN as usize
            } else {
                h.total_bytes as usize
            };
            if !scan.make_available(need) {
                if scan.exhausted(log_bytes) {
                    break;
                }
                return;
            }
            let at = scan.cursor;
            let payload =
                &scan.buffer[at + HEADER_BYTES..at + HEADER_BYTES + h.payload_bytes as usize];
            if RecordHeader::verify(&scan.buffer[at..at + HEADER_BYTES], payload).is_err() {
                break;
            }
            // A valid record: keep it, durable.
            let position = scan.buffer_position;
            let total = h.total_bytes as u64;
            if h.kind == RecordKind::Wrap {
                scan.skip(total);
                scan.buffer_position = log_bytes;
            } else {
                scan.cursor += need;
                scan.buffer_position += total;
            }
            scan.consumed += total;
            scan.expected_seq = h.seq + 1;
            scan.expected_prev_epoch = h.epoch;
            scan.expected_epoch = None;
            if scan.buffer_position == log_bytes {
                // The buffer runs on from the start of the log.
                scan.buffer_position = 0;
            }
            self.stats.records_scanned += 1;
            self.stats.bytes_scanned += total;
            if h.kind == RecordKind::Data {
                *self.data_sizes.entry(total).or_default() += 1;
            }
            self.records.insert(
                h.seq,
                RecordInfo {
                    position,
                    total_bytes: total,
                    header: h,
                    state: RecordState::Durable,
                    live_bytes: 0,
                    request: None,
                },
            );
        }
        self.finish_recovery(now);
    }

    fn finish_recovery(&mut self, now: Nanos) {
        let Phase::Scanning(scan) = std::mem::replace(&mut self.phase, Phase::Ready) else {
            return;
        };
        let sb = scan.sb;
        self.next_seq = scan.expected_seq;
        self.ack_cursor = sb.tail_seq;
        self.head = scan.buffer_position % self.config.log_bytes;
        self.last_epoch = scan.expected_prev_epoch;
        // A new life starts a new epoch (see the scan's chain rule).
        self.epoch = self.random_epoch();
        self.used_bytes = scan.consumed;
        // Replay in log order; every record is durable.
        let headers: Vec<RecordHeader> = self.records.values().map(|r| r.header).collect();
        for h in headers {
            self.apply(h);
            self.ack_cursor = h.seq + 1;
        }
        self.advance_tail();
        if scan.consumed == 0 {
            // No record at the tail: the superblock names the epoch of a record that never
            // became durable, and a new record at the tail (of this life's epoch) would not
            // chain on at the next recovery. Record this life's epoch first; records are
            // acknowledged only once it is durable.
            self.unrecorded_epoch = Some(self.epoch);
            let sb = Superblock {
                store_id: self.store_id,
                generation: self.durable.generation + 1,
                log_bytes: self.config.log_bytes,
                tail: self.head,
                tail_seq: self.next_seq,
                tail_epoch: self.epoch,
                tail_prev_epoch: self.last_epoch,
            };
            self.write_superblock_now(sb);
        }
        self.stats.valid_data_bytes = self.records.values().map(|r| r.live_bytes).sum();
        self.stats.recovery_ns = now - scan.started;
        self.last_activity = now;
        self.clean();
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
