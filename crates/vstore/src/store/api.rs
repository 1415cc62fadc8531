//! The store's interface: its configuration, requests and replies, and the disk operations a
//! driver carries out for it.

use super::*;

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
    /// Removes the client's copies of versions up to `version` in the range. `generation`: the
    /// sender's (see [`Request::Metadata`]).
    Delete {
        client: u64,
        volume: u64,
        offset_bytes: u64,
        length_bytes: u64,
        version: u64,
        generation: u64,
    },
    /// The client's valid ranges and versions (for client recovery, Everest §3.2.1). The
    /// client's requests still waiting for space are refused (`Full`), and the answer waits
    /// until every record appended before it is durable: a restarting client sees everything
    /// its previous incarnation got into the log.
    ///
    /// `generation` (0: none) fences the client's earlier incarnations: from the moment the
    /// request arrives, writes whose version belongs to a lower generation
    /// ([`generation_of`]) and deletes sent by one are refused ([`StoreError::Fenced`]), so a
    /// deposed writer's request still in the network cannot land after the new one recovered.
    /// The floor is recorded in the superblock before the answer leaves, and survives restarts.
    /// The superblock holds at most [`FENCES_MAX`] clients' floors; beyond, a client is served
    /// unfenced ([`Stats::unfenced_metadata`]).
    Metadata {
        client: u64,
        generation: u64,
    },
}

/// Versions are `generation << GENERATION_SHIFT | counter`: each incarnation of a client (an
/// Everest client's start, a Sierra group's new primary) writes with a higher generation.
pub const GENERATION_SHIFT: u32 = 40;

/// The generation a version was written by.
pub fn generation_of(version: u64) -> u64 {
    version >> GENERATION_SHIFT
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
    #[error("fenced: a newer incarnation of this client has recovered from the store")]
    Fenced,
    /// Given by the store's server, never by the core: the client id belongs to another
    /// authenticated peer (each id is bound to the first peer that used it).
    #[error("denied: this client id belongs to another authenticated peer")]
    Denied,
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
    /// Attempts to append a request that was waiting for room (each waiting request is tried
    /// again when room may have come; the work of a full store per request).
    pub waiting_retries: u64,
    /// Writes and deletes refused because a newer incarnation of their client fenced them.
    pub fenced_refusals: u64,
    /// Metadata requests whose generation could not be recorded: the fence table was full
    /// ([`FENCES_MAX`] clients). Those clients are not fenced (a known limit).
    pub unfenced_metadata: u64,
}
