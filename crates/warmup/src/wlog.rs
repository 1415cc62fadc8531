//! Bonfire's monitoring log (§5), sans I/O: what the volume server writes to its warm-up log file
//! and how it reads it back to pre-load a new cache.
//!
//! Monitoring records every block I/O below the cache (cache loads after read misses, and
//! writes) as an entry in an in-memory staging buffer. When the metadata buffer (default
//! 256 KiB) or, with data logging, the data buffer (default 128 MiB) is full, the staged
//! entries, and their data, become one **chunk**, appended to a circular log.
//!
//! The log file (the byte layout is in `docs/FORMATS.md`):
//! - **superblock**, the first 4 KiB: magic `CRDWLOG1`, version, flags (bit 0: closed
//!   cleanly, bit 1: data logged), the log instance (a random id every chunk repeats), the
//!   capacity, `data_from` (the first chunk whose data may be used), then a CRC32C;
//! - **chunks** from offset 4096 on, each starting on a 4 KiB boundary: a 48-byte header, the
//!   entries (16 bytes: the 4 KiB block number, the block count, flags — bit 0: a write, bit 1:
//!   its data follows), zero padding to 4 KiB, then the data of the entries with data, in order.
//!   A chunk that does not fit before the end of the file goes to offset 4096 (the log wraps),
//!   overwriting the oldest chunks.
//!
//! Reading back ([`scan`]) reads every page for chunk headers and keeps every chunk whose
//! metadata CRC is intact, whose instance is the log's and that does not start inside a newer
//! chunk; a chunk partly overwritten by a newer one, or torn by a crash, fails a CRC and is
//! skipped. [`plan`] and [`plan_by`] choose the blocks to pre-load (Last-K: newest first) with
//! each block's newest entry. A chunk's data is read (and its data CRC checked,
//! [`Chunk::data_intact`]) only when the pre-load uses it.
//!
//! **Never stale.** A block's data in the log is trusted only when the log was closed cleanly
//! and the chunk is at least the superblock's `data_from` with no chunk missing after it: every
//! write the volume acknowledged since the last crash then went through the staging buffer into
//! a chunk that is still there, so the newest copy in the log is the block's contents. After a
//! crash, writes staged but not yet written are lost from the log, so the plan reads every block
//! from the volume instead (metadata-only), which always has the acknowledged contents, and the
//! next chunks start a new generation of sequence numbers with `data_from` at its first.

use crate::algorithms::Algorithm;
use crate::sim::BLOCK_BYTES;

pub const PAGE: u64 = 4096;
pub const SUPERBLOCK_MAGIC: &[u8; 8] = b"CRDWLOG1";
pub const CHUNK_MAGIC: &[u8; 4] = b"CWLC";
/// Chunk sequence numbers: a generation (bumped by every start that finds the log not clean,
/// so that no chunk a crashed life wrote, found or not, is ever taken for a newer one) above
/// this many bits of sequence within it.
pub const GENERATION_SHIFT: u32 = 40;
/// 2: the superblock holds `data_from` (version 1 logs are read, their data not used).
pub const VERSION: u32 = 2;
pub const ENTRY_BYTES: usize = 16;
pub const HEADER_BYTES: usize = 48;
const FLAG_CLEAN: u32 = 1;
const FLAG_DATA: u32 = 2;
const ENTRY_WRITE: u32 = 1;
const ENTRY_DATA: u32 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub instance: u64,
    pub capacity: u64,
    pub clean: bool,
    pub data: bool,
    /// The first chunk sequence number whose logged data may be used: the first chunk written
    /// after the last start that found the log not clean (a crash). Every life since then was
    /// closed cleanly, so every entry it staged is in the log; entries staged before that crash
    /// may be missing, so older chunks' data may be older than a block's latest change.
    pub data_from: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum LogError {
    /// No superblock: a new or foreign file.
    NoSuperblock,
    /// The superblock's CRC or fields are wrong.
    Corrupt(String),
    TooSmall {
        capacity: u64,
    },
}

impl std::fmt::Display for LogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogError::NoSuperblock => f.write_str("no warm-up log superblock"),
            LogError::Corrupt(why) => write!(f, "the warm-up log superblock is damaged: {why}"),
            LogError::TooSmall { capacity } => write!(
                f,
                "a warm-up log of {capacity} bytes is too small (at least 64 KiB)"
            ),
        }
    }
}

impl std::error::Error for LogError {}

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; PAGE as usize];
        b[0..8].copy_from_slice(SUPERBLOCK_MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        let flags = (self.clean as u32 * FLAG_CLEAN) | (self.data as u32 * FLAG_DATA);
        b[12..16].copy_from_slice(&flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.instance.to_le_bytes());
        b[24..32].copy_from_slice(&self.capacity.to_le_bytes());
        b[32..40].copy_from_slice(&self.data_from.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Superblock, LogError> {
        if b.len() < 44 || &b[0..8] != SUPERBLOCK_MAGIC {
            return Err(LogError::NoSuperblock);
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8"));
        let data_from = match u32_at(8) {
            VERSION if crc32c::crc32c(&b[0..40]) == u32_at(40) => u64_at(32),
            // A version 1 log (no `data_from`): its entries are used, its data never.
            1 if crc32c::crc32c(&b[0..32]) == u32_at(32) => u64::MAX,
            VERSION | 1 => return Err(LogError::Corrupt("CRC mismatch".into())),
            other => return Err(LogError::Corrupt(format!("version {other}"))),
        };
        let capacity = u64_at(24);
        if capacity < 16 * PAGE || !capacity.is_multiple_of(PAGE) {
            return Err(LogError::Corrupt(format!("capacity {capacity}")));
        }
        let flags = u32_at(12);
        Ok(Superblock {
            instance: u64_at(16),
            capacity,
            clean: flags & FLAG_CLEAN != 0,
            data: flags & FLAG_DATA != 0,
            data_from,
        })
    }
}

/// One monitored I/O below the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// First 4 KiB block.
    pub block: u64,
    pub blocks: u32,
    pub write: bool,
}

/// The staging buffers and the log's write position.
pub struct Monitor {
    instance: u64,
    capacity: u64,
    data: bool,
    metadata_limit: usize,
    data_limit: usize,
    entries: Vec<(Entry, bool)>,
    staged_data: Vec<u8>,
    next_seq: u64,
    /// Where the next chunk goes.
    position: u64,
}

/// A chunk ready to be written at `offset`.
pub struct ChunkWrite {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

impl Monitor {
    /// `after`: the sequence number and end offset of the newest chunk already in the log.
    pub fn new(
        superblock: Superblock,
        metadata_buffer_bytes: usize,
        data_buffer_bytes: usize,
        after: Option<(u64, u64)>,
    ) -> Monitor {
        // A chunk must fit in the log with room to spare: at most half of it.
        let room = ((superblock.capacity - PAGE) / 2) as usize;
        let metadata_limit = metadata_buffer_bytes.clamp(ENTRY_BYTES, room / 2) / ENTRY_BYTES;
        let data_limit = data_buffer_bytes.clamp(BLOCK_BYTES as usize, room / 2);
        let (next_seq, position) = after.map_or((1, PAGE), |(seq, end)| (seq + 1, end));
        Monitor {
            instance: superblock.instance,
            capacity: superblock.capacity,
            data: superblock.data,
            metadata_limit,
            data_limit,
            entries: Vec::new(),
            staged_data: Vec::new(),
            next_seq,
            position,
        }
    }

    /// Records an I/O; `data` (whole blocks) is kept when the log holds data. Returns a chunk
    /// to write when a staging buffer is full.
    pub fn record(&mut self, entry: Entry, data: Option<&[u8]>) -> Option<ChunkWrite> {
        if entry.blocks == 0 {
            return None;
        }
        let with_data = match data {
            Some(d) if self.data && d.len() as u64 == entry.blocks as u64 * BLOCK_BYTES => {
                if d.len() > self.data_limit {
                    // Larger than the data buffer: its metadata only.
                    false
                } else {
                    if self.staged_data.len() + d.len() > self.data_limit {
                        let chunk = self.flush();
                        self.entries.push((entry, true));
                        self.staged_data.extend_from_slice(d);
                        return chunk;
                    }
                    self.staged_data.extend_from_slice(d);
                    true
                }
            }
            _ => false,
        };
        self.entries.push((entry, with_data));
        if self.entries.len() >= self.metadata_limit {
            return self.flush();
        }
        None
    }

    /// The staged entries, newest last (for a pre-load within the same process).
    pub fn staged(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().map(|(e, _)| e)
    }

    pub fn staged_entries(&self) -> usize {
        self.entries.len()
    }

    /// Makes a chunk of everything staged (`None` when nothing is).
    pub fn flush(&mut self) -> Option<ChunkWrite> {
        if self.entries.is_empty() {
            return None;
        }
        let entries_bytes = HEADER_BYTES + self.entries.len() * ENTRY_BYTES;
        let data_at = entries_bytes.next_multiple_of(PAGE as usize);
        let total = (data_at + self.staged_data.len()).next_multiple_of(PAGE as usize);
        let mut b = vec![0u8; total];
        b[0..4].copy_from_slice(CHUNK_MAGIC);
        b[4..8].copy_from_slice(&VERSION.to_le_bytes());
        b[8..16].copy_from_slice(&self.instance.to_le_bytes());
        b[16..24].copy_from_slice(&self.next_seq.to_le_bytes());
        b[24..28].copy_from_slice(&(self.entries.len() as u32).to_le_bytes());
        b[28..32]
            .copy_from_slice(&((self.staged_data.len() as u64 / BLOCK_BYTES) as u32).to_le_bytes());
        b[32..36].copy_from_slice(&((total as u64 / PAGE) as u32).to_le_bytes());
        // 36..40: metadata CRC; 40..44: data CRC; 44..48: zero.
        for (i, (e, with_data)) in self.entries.iter().enumerate() {
            let at = HEADER_BYTES + i * ENTRY_BYTES;
            b[at..at + 8].copy_from_slice(&e.block.to_le_bytes());
            b[at + 8..at + 12].copy_from_slice(&e.blocks.to_le_bytes());
            let flags = (e.write as u32 * ENTRY_WRITE) | (*with_data as u32 * ENTRY_DATA);
            b[at + 12..at + 16].copy_from_slice(&flags.to_le_bytes());
        }
        b[data_at..data_at + self.staged_data.len()].copy_from_slice(&self.staged_data);
        let data_crc = crc32c::crc32c(&self.staged_data);
        b[40..44].copy_from_slice(&data_crc.to_le_bytes());
        let crc = metadata_crc(&b[..entries_bytes]);
        b[36..40].copy_from_slice(&crc.to_le_bytes());
        if self.position + total as u64 > self.capacity {
            self.position = PAGE;
        }
        let offset = self.position;
        self.position += total as u64;
        self.next_seq += 1;
        self.entries.clear();
        self.staged_data.clear();
        Some(ChunkWrite { offset, bytes: b })
    }
}

/// CRC32C of the header (its metadata CRC field taken as zero) and the entries.
fn metadata_crc(b: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&b[..36]);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, &b[40..])
}

/// A chunk found in the log.
#[derive(Clone, Debug)]
pub struct Chunk {
    pub offset: u64,
    pub seq: u64,
    pub length: u64,
    /// Where its data starts, how many blocks, and their CRC32C.
    pub data_offset: u64,
    pub data_blocks: u64,
    pub data_crc: u32,
    /// Entries, and for each the offset of its data in the log when logged.
    pub entries: Vec<(Entry, Option<u64>)>,
}

impl Chunk {
    /// Whether `data` (this chunk's data region, read from the log) is what was written.
    pub fn data_intact(&self, data: &[u8]) -> bool {
        data.len() as u64 == self.data_blocks * BLOCK_BYTES && crc32c::crc32c(data) == self.data_crc
    }
}

/// Every intact chunk of `instance` in a log of `capacity` bytes, oldest first. `read(offset,
/// length)` reads the log; only headers and entries are read. `next_data(offset)` may return
/// where data resumes at or after `offset` (skipping a sparse file's holes), or `offset`.
pub fn scan<E>(
    capacity: u64,
    instance: u64,
    mut read: impl FnMut(u64, usize) -> Result<Vec<u8>, E>,
    mut next_data: impl FnMut(u64) -> u64,
) -> Result<Vec<Chunk>, E> {
    // Pages are read a window at a time (where no chunk is, e.g. a log not yet written to the
    // end, each page would otherwise be a read).
    const WINDOW: u64 = 1 << 20;
    let mut out = Vec::new();
    let mut window: (u64, Vec<u8>) = (0, Vec::new());
    let mut at = PAGE;
    while at + PAGE <= capacity {
        let inside = at >= window.0 && at + PAGE <= window.0 + window.1.len() as u64;
        if !inside {
            // Holes hold no chunk: go to the next page with data.
            let resume = next_data(at).max(at).next_multiple_of(PAGE);
            if resume != at {
                at = resume;
                continue;
            }
            let length = WINDOW.min(capacity - at) as usize;
            window = (at, read(at, length)?);
            if window.1.len() < PAGE as usize {
                break;
            }
        }
        let from = (at - window.0) as usize;
        let head = &window.1[from..from + PAGE as usize];
        match parse_chunk(head, at, capacity, instance, &mut read)? {
            // Every page is looked at, the pages of a chunk found too: a newer chunk may start
            // inside an older one it partly overwrote (its metadata still intact).
            Some(chunk) => {
                out.push(chunk);
                at += PAGE;
            }
            None => at += PAGE,
        }
    }
    out.sort_by_key(|c| c.seq);
    // A chunk lying inside a newer one is an old remnant (or bytes inside the newer one's data
    // that look like a chunk): the newer one overwrote its start.
    let mut kept: Vec<Chunk> = Vec::with_capacity(out.len());
    let mut newer: Vec<(u64, u64)> = Vec::new();
    for c in out.into_iter().rev() {
        if !newer.iter().any(|&(o, end)| c.offset > o && c.offset < end) {
            newer.push((c.offset, c.offset + c.length));
            kept.push(c);
        }
    }
    kept.reverse();
    Ok(kept)
}

fn parse_chunk<E>(
    head: &[u8],
    at: u64,
    capacity: u64,
    instance: u64,
    read: &mut impl FnMut(u64, usize) -> Result<Vec<u8>, E>,
) -> Result<Option<Chunk>, E> {
    if head.len() < HEADER_BYTES || &head[0..4] != CHUNK_MAGIC {
        return Ok(None);
    }
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4"));
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8"));
    if !(1..=VERSION).contains(&u32_at(head, 4)) || u64_at(head, 8) != instance {
        return Ok(None);
    }
    let entries = u32_at(head, 24) as usize;
    let data_blocks = u32_at(head, 28) as u64;
    let length = u32_at(head, 32) as u64 * PAGE;
    let entries_bytes = HEADER_BYTES + entries * ENTRY_BYTES;
    let data_at = entries_bytes.next_multiple_of(PAGE as usize) as u64;
    if length == 0 || at + length > capacity || data_at + data_blocks * BLOCK_BYTES > length {
        return Ok(None);
    }
    let meta = if entries_bytes <= head.len() {
        head[..entries_bytes].to_vec()
    } else {
        let m = read(at, entries_bytes)?;
        if m.len() < entries_bytes {
            return Ok(None);
        }
        m
    };
    if metadata_crc(&meta) != u32_at(&meta, 36) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(entries);
    let mut data = at + data_at;
    for i in 0..entries {
        let e = HEADER_BYTES + i * ENTRY_BYTES;
        let entry = Entry {
            block: u64_at(&meta, e),
            blocks: u32_at(&meta, e + 8),
            write: u32_at(&meta, e + 12) & ENTRY_WRITE != 0,
        };
        let where_data = (u32_at(&meta, e + 12) & ENTRY_DATA != 0).then_some(data);
        if where_data.is_some() {
            data += entry.blocks as u64 * BLOCK_BYTES;
        }
        out.push((entry, where_data));
    }
    if data != at + data_at + data_blocks * BLOCK_BYTES {
        return Ok(None);
    }
    Ok(Some(Chunk {
        offset: at,
        seq: u64_at(&meta, 16),
        length,
        data_offset: at + data_at,
        data_blocks,
        data_crc: u32_at(&meta, 40),
        entries: out,
    }))
}

/// A reader over a log held in memory (tests, small logs).
pub fn read_from(
    log: &[u8],
) -> impl FnMut(u64, usize) -> Result<Vec<u8>, std::convert::Infallible> + '_ {
    move |offset, length| {
        let start = (offset as usize).min(log.len());
        let end = (start + length).min(log.len());
        Ok(log[start..end].to_vec())
    }
}

/// The newest chunk's sequence number and end, where the monitor continues.
pub fn resume_point(chunks: &[Chunk]) -> Option<(u64, u64)> {
    chunks.last().map(|c| (c.seq, c.offset + c.length))
}

/// What to pre-load: blocks newest first, each with the log offset of its newest data when
/// that may be used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub blocks: Vec<(u64, Option<u64>)>,
}

impl Plan {
    /// The blocks to read from the volume (no usable data in the log), sorted.
    pub fn from_volume(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .blocks
            .iter()
            .filter(|(_, d)| d.is_none())
            .map(|(b, _)| *b)
            .collect();
        v.sort_unstable();
        v
    }

    /// (block, log offset) of the blocks loaded from the snapshot, by log offset.
    pub fn from_snapshot(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self
            .blocks
            .iter()
            .filter_map(|(b, d)| d.map(|d| (*b, d)))
            .collect();
        v.sort_unstable_by_key(|(_, d)| *d);
        v
    }
}

/// The oldest chunk whose logged data may be used: the chunks from it to the newest have
/// consecutive sequence numbers, and none is older than `data_from` (the superblock's; `None`:
/// no data at all, `u64::MAX` is returned). A chunk missing in between (its header overwritten when the
/// log wrapped past an older chunk it left whole, or torn) may have held a newer entry for a
/// block than an older chunk's, so data older than the newest missing chunk is not trusted
/// (its entries still name blocks to read from the volume). `chunks` are sorted by sequence.
pub fn data_trusted_from(chunks: &[Chunk], data_from: Option<u64>) -> u64 {
    let Some(data_from) = data_from else {
        return u64::MAX;
    };
    let mut from = chunks.last().map_or(0, |c| c.seq);
    for c in chunks.iter().rev().skip(1) {
        if c.seq + 1 != from {
            break;
        }
        from = c.seq;
    }
    from.max(data_from)
}

/// Newest first over the chunks then `staged` (entries newer than every chunk, newest last),
/// each block once, up to `limit` blocks. Data offsets are kept only with `data_from` (the log was
/// closed cleanly) and the block's newest entry carries data.
pub fn plan(chunks: &[Chunk], staged: &[Entry], limit: usize, data_from: Option<u64>) -> Plan {
    let mut seen = rustc_hash::FxHashSet::default();
    let mut blocks = Vec::new();
    let trusted = data_trusted_from(chunks, data_from);
    let newest_first = staged
        .iter()
        .rev()
        .map(|e| (*e, None))
        .chain(chunks.iter().rev().flat_map(|c| {
            let keep = c.seq >= trusted;
            c.entries
                .iter()
                .rev()
                .map(move |(e, d)| (*e, d.filter(|_| keep)))
        }));
    'all: for (entry, data) in newest_first {
        // The entry's blocks, last first (the newest-first order within one I/O is moot).
        for k in (0..entry.blocks as u64).rev() {
            if blocks.len() >= limit {
                break 'all;
            }
            let block = entry.block + k;
            if seen.insert(block) {
                let d = data.map(|d| d + k * BLOCK_BYTES);
                blocks.push((block, d));
            }
        }
    }
    Plan { blocks }
}

/// [`plan`] with the pre-load's algorithm (§4.2) choosing which logged blocks, up to `limit`:
/// Last-K the newest ([`plan`] itself), First-K the oldest, Top-K the most often logged (ties:
/// the more recent), Random-K a seeded uniform sample of the logged blocks. Whatever the
/// choice, a block's data offset is that of its newest entry, so logged data is never older
/// than the block's latest logged change.
pub fn plan_by(
    chunks: &[Chunk],
    staged: &[Entry],
    limit: usize,
    data_from: Option<u64>,
    algorithm: Algorithm,
    seed: u64,
) -> Plan {
    if algorithm == Algorithm::LastK {
        return plan(chunks, staged, limit, data_from);
    }
    struct Seen {
        last: u64,
        count: u64,
        data: Option<u64>,
    }
    let mut seen: rustc_hash::FxHashMap<u64, Seen> = Default::default();
    // Distinct blocks in the order first logged.
    let mut order: Vec<u64> = Vec::new();
    let mut at = 0u64;
    let trusted = data_trusted_from(chunks, data_from);
    let oldest_first = chunks
        .iter()
        .flat_map(|c| {
            let keep = c.seq >= trusted;
            c.entries.iter().map(move |(e, d)| (*e, d.filter(|_| keep)))
        })
        .chain(staged.iter().map(|e| (*e, None)));
    for (entry, data) in oldest_first {
        for k in 0..entry.blocks as u64 {
            at += 1;
            let block = entry.block + k;
            let s = seen.entry(block).or_insert_with(|| {
                order.push(block);
                Seen {
                    last: at,
                    count: 0,
                    data: None,
                }
            });
            s.last = at;
            s.count += 1;
            s.data = data.map(|d| d + k * BLOCK_BYTES);
        }
    }
    let chosen: Vec<u64> = match algorithm {
        Algorithm::LastK => unreachable!("handled above"),
        Algorithm::FirstK => order.into_iter().take(limit).collect(),
        Algorithm::TopK => {
            order.sort_unstable_by(|a, b| {
                let (x, y) = (&seen[a], &seen[b]);
                (y.count, y.last).cmp(&(x.count, x.last)).then(a.cmp(b))
            });
            order.truncate(limit);
            order
        }
        Algorithm::RandomK => {
            let mut rng = cordillera_types::rng::SimRng::new(seed, 0xb0f1);
            let k = limit.min(order.len());
            for i in 0..k {
                let j = i + rng.below((order.len() - i) as u64) as usize;
                order.swap(i, j);
            }
            order.truncate(k);
            order
        }
    };
    Plan {
        blocks: chosen.into_iter().map(|b| (b, seen[&b].data)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(data: bool) -> Superblock {
        Superblock {
            instance: 0xfeed,
            capacity: 64 * PAGE,
            clean: false,
            data,
            data_from: 1,
        }
    }

    fn scan_mem(log: &[u8], instance: u64) -> Vec<Chunk> {
        scan(log.len() as u64, instance, read_from(log), |o| o).unwrap()
    }

    fn write_into(log: &mut [u8], c: &ChunkWrite) {
        log[c.offset as usize..c.offset as usize + c.bytes.len()].copy_from_slice(&c.bytes);
    }

    fn entry(block: u64, blocks: u32, write: bool) -> Entry {
        Entry {
            block,
            blocks,
            write,
        }
    }

    #[test]
    fn superblocks_round_trip_and_damage_is_detected() {
        let s = Superblock {
            clean: true,
            ..sb(true)
        };
        let mut b = s.encode();
        assert_eq!(Superblock::decode(&b), Ok(s));
        b[20] ^= 1;
        assert!(matches!(Superblock::decode(&b), Err(LogError::Corrupt(_))));
        assert_eq!(
            Superblock::decode(&[0u8; 4096]),
            Err(LogError::NoSuperblock)
        );
    }

    #[test]
    fn chunks_round_trip_wrap_and_torn_ones_are_skipped() {
        let mut log = vec![0u8; 64 * 4096];
        log[..4096].copy_from_slice(&sb(false).encode());
        // 256 entries per 4 KiB metadata buffer.
        let mut m = Monitor::new(sb(false), 4096, 0, None);
        let mut writes = Vec::new();
        for i in 0..10_000u64 {
            if let Some(c) = m.record(entry(i, 1, i % 2 == 0), None) {
                writes.push(c);
            }
        }
        writes.extend(m.flush());
        // Entries fill two pages per chunk (40 + 255 × 16 bytes > 4096).
        assert!(writes.len() >= 39);
        for c in &writes {
            write_into(&mut log, c);
        }
        let chunks = scan_mem(&log, 0xfeed);
        // The log holds 63 pages; the chunks wrapped and the newest are kept, in order.
        assert!(chunks.windows(2).all(|w| w[0].seq < w[1].seq));
        let newest = chunks.last().unwrap();
        assert_eq!(newest.seq, writes.len() as u64);
        assert_eq!(newest.entries.last().unwrap().0, entry(9_999, 1, false));
        // Tear the newest chunk: it is skipped, the one before is the newest.
        let torn = newest.offset as usize + 100;
        log[torn] ^= 0xff;
        let after = scan_mem(&log, 0xfeed);
        assert_eq!(after.last().unwrap().seq, writes.len() as u64 - 1);
        // Another instance's chunks are not ours.
        assert!(scan_mem(&log, 0xbeef).is_empty());
        // The monitor resumes after the newest intact chunk.
        let (seq, end) = resume_point(&after).unwrap();
        let mut m2 = Monitor::new(sb(false), 4096, 0, Some((seq, end)));
        m2.record(entry(1, 1, true), None);
        let c = m2.flush().unwrap();
        assert_eq!(c.offset, end);
    }

    #[test]
    fn the_plan_is_newest_first_and_uses_data_only_when_clean() {
        let mut log = vec![0u8; 64 * 4096];
        let s = sb(true);
        let mut m = Monitor::new(s, 1 << 20, 1 << 20, None);
        let page = |v: u8| vec![v; 4096];
        // Block 7 written with 1, then block 8, then block 7 with 2.
        assert!(m.record(entry(7, 1, true), Some(&page(1))).is_none());
        m.record(entry(8, 1, false), Some(&page(3)));
        write_into(&mut log, &m.flush().unwrap());
        m.record(entry(7, 1, true), Some(&page(2)));
        write_into(&mut log, &m.flush().unwrap());
        let chunks = scan_mem(&log, s.instance);
        assert_eq!(chunks.len(), 2);
        let p = plan(&chunks, &[], 10, Some(1));
        assert_eq!(p.blocks.len(), 2);
        assert_eq!(p.blocks[0].0, 7);
        // Block 7's data is its newest: 2.
        let at = p.blocks[0].1.unwrap() as usize;
        assert_eq!(log[at], 2);
        assert_eq!(log[p.blocks[1].1.unwrap() as usize], 3);
        // A chunk's data is checked against its CRC when used.
        let c = &chunks[1];
        let region = c.data_offset as usize..(c.data_offset + c.data_blocks * 4096) as usize;
        assert!(c.data_intact(&log[region.clone()]));
        log[region.start + 5] ^= 1;
        assert!(!c.data_intact(&log[region]));
        // After a crash, no data is used.
        let crashed = plan(&chunks, &[], 10, None);
        assert!(crashed.blocks.iter().all(|(_, d)| d.is_none()));
        assert_eq!(crashed.from_volume(), vec![7, 8]);
        // Staged entries are newer than every chunk; the limit counts blocks.
        let staged = plan(&chunks, &[entry(100, 4, false)], 3, Some(1));
        assert_eq!(staged.blocks, vec![(103, None), (102, None), (101, None)]);
    }

    #[test]
    fn data_is_trusted_only_after_the_newest_missing_chunk_and_data_from() {
        let chunk = |seq: u64| Chunk {
            offset: PAGE * seq,
            seq,
            length: PAGE,
            data_offset: 0,
            data_blocks: 0,
            data_crc: 0,
            entries: Vec::new(),
        };
        let chunks: Vec<Chunk> = [3, 4, 6, 7, 8].into_iter().map(chunk).collect();
        assert_eq!(data_trusted_from(&chunks, Some(1)), 6);
        assert_eq!(data_trusted_from(&chunks, Some(7)), 7);
        assert_eq!(data_trusted_from(&chunks, None), u64::MAX);
        assert_eq!(data_trusted_from(&[], Some(1)), 1);
    }

    #[test]
    fn a_chunk_written_inside_an_older_one_is_found_and_remnants_inside_newer_ones_are_not() {
        let mut log = vec![0u8; 64 * 4096];
        let s = sb(true);
        let page = |v: u8| vec![v; 4096];
        // An old chunk of 1 + 4 pages at 4096, then (after a wrap, say) a newer one written
        // at its third page.
        let mut m = Monitor::new(s, 1 << 20, 1 << 20, None);
        m.record(
            entry(1, 4, true),
            Some(&[page(1), page(1), page(1), page(1)].concat()),
        );
        let old = m.flush().unwrap();
        assert_eq!((old.offset, old.bytes.len()), (4096, 5 * 4096));
        write_into(&mut log, &old);
        let mut m = Monitor::new(s, 1 << 20, 1 << 20, Some((1, 3 * 4096)));
        m.record(entry(9, 1, true), Some(&page(9)));
        let newer = m.flush().unwrap();
        write_into(&mut log, &newer);
        let chunks = scan_mem(&log, s.instance);
        assert_eq!(
            chunks.iter().map(|c| (c.seq, c.offset)).collect::<Vec<_>>(),
            vec![(1, 4096), (2, 3 * 4096)],
            "the newer chunk inside the older one is found"
        );
        // The older chunk's data was overwritten: its CRC says so.
        let c = &chunks[0];
        let d = &log[c.data_offset as usize..(c.data_offset + c.data_blocks * 4096) as usize];
        assert!(!c.data_intact(d));
        // A copy of a chunk header inside a newer chunk's data is not a chunk.
        let mut m = Monitor::new(s, 1 << 20, 1 << 20, Some((5, 20 * 4096)));
        let mut fake = old.bytes[..4096].to_vec();
        fake[16..24].copy_from_slice(&4u64.to_le_bytes());
        let crc = metadata_crc(&fake[..HEADER_BYTES + ENTRY_BYTES]);
        fake[36..40].copy_from_slice(&crc.to_le_bytes());
        m.record(entry(30, 1, true), Some(&fake));
        write_into(&mut log, &m.flush().unwrap());
        let chunks = scan_mem(&log, s.instance);
        assert_eq!(chunks.last().unwrap().seq, 6);
        assert!(chunks.iter().all(|c| c.seq != 4), "the remnant is dropped");
    }
}
