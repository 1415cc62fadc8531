//! Bonfire's cache as a sans-I/O core (§5): the DRAM block cache a volume server puts above its
//! volume, the monitoring of every I/O below the cache into the warm-up log ([`crate::wlog`]),
//! and the pre-load of a new cache from that log. The core decides; a driver (the volume server
//! in `runtime`, or a simulated node in the tests) does the reads and writes it asks for.
//!
//! # Driver contract
//!
//! ```text
//! WarmCache::open(now, options, log reader)      at start: reads the log (through the reader)
//! while !is_ready(): carry out poll_io(), answer  the log is marked "not clean" durably first
//! load_snapshot(now)                              before the first request
//! per request:  read → hit, or a ticket; read_done(offset, data, ticket) when the volume answers
//!               write_arrived(offset, length) before the write goes to the volume,
//!               write_done(offset, data, ok) / zeroes_done(offset, length) when it is answered
//! after every call: while let Some(io) = poll_io() { carry it out; answer with handle_*_done }
//! once a second: handle_tick(now)
//! to stop: handle_close(now), carry out poll_io() until closed() is Some
//! ```
//!
//! [`CacheIo::VolumeRead`]s are the pre-load's reads (answered by [`WarmCache::preload_done`]);
//! [`CacheIo::VolumeFlush`] asks that every write the volume acknowledged be durable before the
//! log is called clean; log writes need no ordering among themselves (the core never has two
//! overlapping ones in flight, safeguard 5), but a [`CacheIo::LogSync`] makes every log write
//! issued before it durable, and is answered only then.
//!
//! # Coherence (why the cache never serves or pre-loads stale contents)
//!
//! 1. **Tickets.** A read that may fill the cache (a miss, or a pre-load read) carries the write
//!    sequence number when it was issued. It fills a block only if no write to that block
//!    arrived, or completed, after that: a slow read never puts old contents over a newer
//!    write, even when the volume answers the read with data from before a write that
//!    completed first.
//! 2. **Clean close only.** The log is marked not clean (durably) before any request is served;
//!    only [`WarmCache::handle_close`] — after the volume is durable and every staged entry is in
//!    the log and synced — marks it clean. Logged data is pre-loaded only from a clean log; after
//!    a crash every block is read from the volume.
//! 3. **Changes without data.** A write the log cannot hold as whole blocks (part of a block,
//!    zeroes, a write that failed) invalidates the cached blocks and is logged as an entry without
//!    data, so the newest entry for those blocks never points at older logged data.
//! 4. **Concurrent writes.** Two writes to a block in flight at once may reach the volume in
//!    either order (a disk reorders them; an off-loading client orders them by version, not by
//!    completion), so the one answered last need not be the one the volume keeps. A write that
//!    was in flight together with another one to the same block does not fill it: the block is
//!    changed without data (3), and read from the volume next time.
//! 5. **Ordered log writes.** The log is circular: a chunk may be written over an older one
//!    whose write is still in flight, and a disk may land concurrent overlapping writes in either
//!    order — the older chunk on top would hide the newer entries, and a pre-load from the clean
//!    log would serve a block's older logged data. A log write overlapping one in flight is
//!    held, with every log command after it, until that one is answered.
//!
//! [`Safeguards`] can switch each of these off, so the simulation tests can show that each is
//! needed; nothing outside those tests does.

mod invariants;
mod start;
mod status;

use std::collections::{HashMap, VecDeque};

pub use start::{run_in_memory, LogReader, MemoryLog};
pub use status::{PreloadStatus, Status, WarmupSource};

use crate::algorithms::Algorithm;
use crate::data_cache::DataCache;
use crate::wlog::{Entry, Monitor, Superblock};

pub const BLOCK: u64 = 4096;
/// Pre-load reads outstanding, and their largest size.
pub const PRELOAD_DEPTH: usize = 32;
pub const PRELOAD_READ_BLOCKS: u64 = 256;
/// Hit-rate samples: one per this many seconds, the last hour of them.
pub const SAMPLE_S: u64 = 10;
pub const SAMPLES: usize = 360;

const NANOS_PER_S: u64 = 1_000_000_000;

/// The coherence safeguards (module docs); all on except in the tests that remove one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Safeguards {
    pub tickets: bool,
    pub clean_close_only: bool,
    pub changes_without_data: bool,
    pub concurrent_writes: bool,
    pub ordered_log_writes: bool,
}

impl Default for Safeguards {
    fn default() -> Safeguards {
        Safeguards {
            tickets: true,
            clean_close_only: true,
            changes_without_data: true,
            concurrent_writes: true,
            ordered_log_writes: true,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub cache_bytes: u64,
    /// Size of a new log (a file; a device is used whole).
    pub log_bytes: u64,
    /// Log the data too (the performance snapshot, metadata+data).
    pub log_data: bool,
    /// How much to pre-load at start.
    pub warmup_bytes: u64,
    /// Which logged blocks the pre-load chooses (§4.2), within the warm-up size.
    pub algorithm: Algorithm,
    /// Random-K's seed.
    pub seed: u64,
    pub metadata_buffer_bytes: usize,
    pub data_buffer_bytes: usize,
    /// The instance id of a new log (random: chunks of an earlier log are not ours).
    pub new_instance: u64,
    pub safeguards: Safeguards,
}

impl Options {
    pub fn new(cache_bytes: u64) -> Options {
        Options {
            cache_bytes,
            log_bytes: 64 << 20,
            log_data: false,
            warmup_bytes: cache_bytes / 4,
            algorithm: Algorithm::LastK,
            seed: 0,
            metadata_buffer_bytes: 256 << 10,
            data_buffer_bytes: 128 << 20,
            new_instance: 1,
            safeguards: Safeguards::default(),
        }
    }

    /// Options drawn from `setup` over what the seeded simulations explore: a log of
    /// `log_bytes`, with or without data; small warm-up sizes and buffers (so that chunks are
    /// written often); any algorithm; a cache of 8 to `8 + cache_blocks_span - 1` blocks.
    pub fn drawn(
        setup: &mut cordillera_types::rng::SimRng,
        seed: u64,
        log_bytes: u64,
        cache_blocks_span: u64,
    ) -> Options {
        Options {
            log_bytes,
            log_data: setup.chance(0.7),
            warmup_bytes: (8 + setup.below(24)) * BLOCK,
            metadata_buffer_bytes: (4 + setup.below(28) as usize) * 16,
            data_buffer_bytes: (2 + setup.below(6) as usize) * BLOCK as usize,
            algorithm: crate::algorithms::ALGORITHMS[setup.below(4) as usize],
            seed,
            new_instance: seed | 1,
            ..Options::new((8 + setup.below(cache_blocks_span)) * BLOCK)
        }
    }
}

/// What the core asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheIo {
    /// A pre-load read; answer with [`WarmCache::preload_done`].
    VolumeRead {
        offset_bytes: u64,
        length_bytes: u64,
        ticket: Ticket,
    },
    /// Make every write the volume acknowledged durable; answer with
    /// [`WarmCache::handle_volume_flushed`].
    VolumeFlush,
    /// Size a new log file to `length_bytes` (a device: nothing to do); answer with
    /// [`WarmCache::handle_log_done`].
    LogResize { id: u64, length_bytes: u64 },
    LogWrite {
        id: u64,
        offset_bytes: u64,
        data: Vec<u8>,
    },
    /// Every log write issued before it made durable.
    LogSync { id: u64 },
}

/// A read that may fill the cache: the write sequence number when it was issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    seq: u64,
}

/// Where the core is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the not-clean superblock to be durable (the log sync `id`).
    Starting {
        id: u64,
    },
    Running,
    /// Closing: waiting for the volume flush (`None`) or the log sync `id`; `superblock`:
    /// whether the clean superblock is written already.
    Closing {
        id: Option<u64>,
        superblock: bool,
    },
    Closed(Result<(), String>),
}

/// The log the core writes, when it has one.
struct Log {
    superblock: Superblock,
    monitor: Option<Monitor>,
    failed: Option<String>,
    chunks: u64,
    bytes: u64,
}

pub struct WarmCache {
    options: Options,
    cache: DataCache,
    log: Option<Log>,
    phase: Phase,
    out: VecDeque<CacheIo>,
    next_id: u64,
    /// Events so far (arrived or completed writes), numbering tickets.
    write_seq: u64,
    /// Block → the sequence number of its latest write event, kept while reads are in flight.
    written_at: HashMap<u64, u64>,
    reads_in_flight: usize,
    /// Block → writes to it in flight (arrived, not answered), and whether two of them were
    /// in flight at once since it last had none (safeguard 4).
    writes_in_flight: HashMap<u64, (u32, bool)>,
    counters: status::Counters,
    preload: status::Preload,
    /// Pre-load reads are not issued while held (the volume below is not ready, or stops).
    preload_held: bool,
    /// Log writes in flight (id, first byte, end), and the log commands held behind one that
    /// would overlap them, in order (safeguard 5).
    log_writing: Vec<(u64, u64, u64)>,
    log_held: VecDeque<CacheIo>,
}

fn blocks_of(offset: u64, length: u64) -> (u64, u64) {
    if length == 0 {
        return (offset / BLOCK, 0);
    }
    let first = offset / BLOCK;
    let last = (offset + length - 1) / BLOCK;
    (first, last - first + 1)
}

/// The whole blocks inside `[offset, offset + length)`: (first block, count, byte skip).
fn whole_blocks(offset: u64, length: u64) -> (u64, u64, u64) {
    let first = offset.div_ceil(BLOCK);
    let end = (offset + length) / BLOCK;
    if end <= first {
        return (first, 0, 0);
    }
    (first, end - first, first * BLOCK - offset)
}

impl WarmCache {
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Whether requests may be served (the log's not-clean mark is durable, or there is no log).
    pub fn is_ready(&self) -> bool {
        !matches!(self.phase, Phase::Starting { .. })
    }

    pub fn source(&self) -> &WarmupSource {
        &self.preload.source
    }

    /// The close's outcome, once it is over.
    pub fn closed(&self) -> Option<&Result<(), String>> {
        match &self.phase {
            Phase::Closed(r) => Some(r),
            _ => None,
        }
    }

    /// Holds the pre-load's reads back (or lets them go): a driver whose volume cannot serve
    /// reads yet, or is stopping, holds them.
    pub fn hold_preload(&mut self, hold: bool) {
        self.hold_preload_step(hold);
        self.check_invariants();
    }

    fn hold_preload_step(&mut self, hold: bool) {
        self.preload_held = hold;
    }

    /// The next thing to do.
    pub fn poll_io(&mut self) -> Option<CacheIo> {
        if self.out.is_empty() && self.phase == Phase::Running && !self.preload_held {
            self.issue_preload_reads();
        }
        self.out.pop_front()
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn log_write(&mut self, offset_bytes: u64, data: Vec<u8>) {
        let id = self.id();
        self.issue_log(CacheIo::LogWrite {
            id,
            offset_bytes,
            data,
        });
    }

    fn log_sync(&mut self) -> u64 {
        let id = self.id();
        self.issue_log(CacheIo::LogSync { id });
        id
    }

    /// Issues a log command, or holds it (and every one after it) while it would overlap a
    /// log write in flight (safeguard 5).
    fn issue_log(&mut self, io: CacheIo) {
        if !self.log_held.is_empty() || self.overlaps_log_writing(&io) {
            self.log_held.push_back(io);
            return;
        }
        self.send_log(io);
    }

    /// Hands a log command to the driver; a write is in flight until answered.
    fn send_log(&mut self, io: CacheIo) {
        if let CacheIo::LogWrite {
            id,
            offset_bytes,
            data,
        } = &io
        {
            self.log_writing
                .push((*id, *offset_bytes, offset_bytes + data.len() as u64));
        }
        self.out.push_back(io);
    }

    fn overlaps_log_writing(&self, io: &CacheIo) -> bool {
        let CacheIo::LogWrite {
            offset_bytes, data, ..
        } = io
        else {
            return false;
        };
        let (lo, hi) = (*offset_bytes, offset_bytes + data.len() as u64);
        self.options.safeguards.ordered_log_writes
            && self.log_writing.iter().any(|&(_, l, h)| l < hi && lo < h)
    }

    /// A log command answered: the ones held behind it go as far as they can.
    fn log_answered(&mut self, id: u64) {
        self.log_writing.retain(|&(w, _, _)| w != id);
        while let Some(io) = self.log_held.front() {
            if self.overlaps_log_writing(io) {
                break;
            }
            let io = self.log_held.pop_front().expect("a held command");
            self.send_log(io);
        }
    }

    fn record(&mut self, entry: Entry, data: Option<&[u8]>) {
        let Some(log) = self.log.as_mut() else {
            return;
        };
        let Some(m) = log.monitor.as_mut() else {
            return;
        };
        if let Some(chunk) = m.record(entry, data) {
            // A failed log is not written to; the staging buffer keeps being emptied.
            if log.failed.is_none() {
                log.chunks += 1;
                log.bytes += chunk.bytes.len() as u64;
                self.log_write(chunk.offset, chunk.bytes);
            }
        }
    }

    /// A log command answered.
    pub fn handle_log_done(&mut self, now: u64, id: u64, result: Result<(), String>) {
        self.handle_log_done_step(now, id, result);
        self.check_invariants();
    }

    fn handle_log_done_step(&mut self, now: u64, id: u64, result: Result<(), String>) {
        self.log_answered(id);
        if let Err(e) = &result {
            if let Some(log) = self.log.as_mut() {
                log.failed.get_or_insert_with(|| e.clone());
            }
        }
        match (self.phase.clone(), result) {
            (Phase::Starting { .. }, Err(e)) => {
                // The log cannot be marked not clean: it is not used at all.
                tracing::warn!(error = %e, "the warm-up log cannot be written; the cache warms on demand");
                self.log = None;
                self.out.clear();
                self.log_writing.clear();
                self.log_held.clear();
                self.preload
                    .fall_back(now, format!("the warm-up log cannot be written: {e}"));
                self.phase = Phase::Running;
            }
            (Phase::Starting { id: sync }, Ok(())) if sync == id => self.phase = Phase::Running,
            (
                Phase::Closing {
                    id: Some(sync),
                    superblock,
                },
                _,
            ) if sync == id => {
                // Any log write that failed before this sync (its answer came first) means the
                // log is not whole: it must not be called clean.
                if let Some(e) = self.log.as_ref().and_then(|l| l.failed.clone()) {
                    self.phase = Phase::Closed(Err(format!("closing the warm-up log: {e}")));
                } else if superblock {
                    if let Some(log) = self.log.as_mut() {
                        log.monitor = None;
                    }
                    self.phase = Phase::Closed(Ok(()));
                } else {
                    self.write_clean_superblock();
                }
            }
            _ => {}
        }
    }

    fn write_clean_superblock(&mut self) {
        let Some(log) = self.log.as_ref() else {
            return;
        };
        let clean = Superblock {
            clean: true,
            ..log.superblock
        };
        self.log_write(0, clean.encode());
        let id = self.log_sync();
        self.phase = Phase::Closing {
            id: Some(id),
            superblock: true,
        };
    }

    /// The log can no longer be written (its writer is gone): every command outstanding failed.
    pub fn fail_log(&mut self, now: u64, why: String) {
        self.fail_log_step(now, why);
        self.check_invariants();
    }

    fn fail_log_step(&mut self, now: u64, why: String) {
        match self.phase {
            Phase::Starting { id } | Phase::Closing { id: Some(id), .. } => {
                self.handle_log_done(now, id, Err(why))
            }
            _ => {
                if let Some(log) = self.log.as_mut() {
                    log.failed.get_or_insert(why);
                }
            }
        }
    }

    /// Starts a clean close: the volume made durable, the staged entries written, then the log
    /// marked clean. Serve nothing after this.
    pub fn handle_close(&mut self, _now: u64) {
        self.handle_close_step(_now);
        self.check_invariants();
    }

    fn handle_close_step(&mut self, _now: u64) {
        if !matches!(self.phase, Phase::Running) {
            return;
        }
        let has_monitor = self.log.as_ref().is_some_and(|l| l.monitor.is_some());
        if !has_monitor {
            self.phase = Phase::Closed(Ok(()));
            return;
        }
        if let Some(e) = self.log.as_ref().and_then(|l| l.failed.clone()) {
            self.phase = Phase::Closed(Err(format!("the warm-up log failed earlier: {e}")));
            return;
        }
        self.out.push_back(CacheIo::VolumeFlush);
        self.phase = Phase::Closing {
            id: None,
            superblock: false,
        };
    }

    /// The volume flush asked for by the close answered.
    pub fn handle_volume_flushed(&mut self, _now: u64, result: Result<(), String>) {
        self.handle_volume_flushed_step(_now, result);
        self.check_invariants();
    }

    fn handle_volume_flushed_step(&mut self, _now: u64, result: Result<(), String>) {
        if self.phase
            != (Phase::Closing {
                id: None,
                superblock: false,
            })
        {
            return;
        }
        if let Err(e) = result {
            self.phase = Phase::Closed(Err(format!("flushing the volume: {e}")));
            return;
        }
        let chunk = self
            .log
            .as_mut()
            .and_then(|l| l.monitor.as_mut())
            .and_then(|m| m.flush());
        if let Some(chunk) = chunk {
            if let Some(log) = self.log.as_mut() {
                log.chunks += 1;
                log.bytes += chunk.bytes.len() as u64;
            }
            self.log_write(chunk.offset, chunk.bytes);
        }
        let id = self.log_sync();
        self.phase = Phase::Closing {
            id: Some(id),
            superblock: false,
        };
    }

    /// The snapshot's pages go into the cache; call before serving any request.
    pub fn load_snapshot(&mut self, now: u64) {
        self.load_snapshot_step(now);
        self.check_invariants();
    }

    fn load_snapshot_step(&mut self, now: u64) {
        for (block, page) in std::mem::take(&mut self.preload.snapshot) {
            if self.cache.fill_if_absent(block, &page) {
                self.preload.loaded_blocks += 1;
            }
        }
        self.preload.finish_if_done(now);
    }

    fn issue_preload_reads(&mut self) {
        let p = &mut self.preload;
        while p.outstanding < PRELOAD_DEPTH && p.next < p.blocks.len() {
            let start = p.blocks[p.next];
            let mut n = 1;
            while p.next + (n as usize) < p.blocks.len()
                && p.blocks[p.next + n as usize] == start + n
                && n < PRELOAD_READ_BLOCKS
            {
                n += 1;
            }
            p.next += n as usize;
            p.outstanding += 1;
            self.reads_in_flight += 1;
            self.out.push_back(CacheIo::VolumeRead {
                offset_bytes: start * BLOCK,
                length_bytes: n * BLOCK,
                ticket: Ticket {
                    seq: self.write_seq,
                },
            });
        }
    }

    /// A pre-load read answered (`None`: it failed; the blocks stay out).
    pub fn preload_done(&mut self, now: u64, offset: u64, data: Option<&[u8]>, ticket: Ticket) {
        self.preload_done_step(now, offset, data, ticket);
        self.check_invariants();
    }

    fn preload_done_step(&mut self, now: u64, offset: u64, data: Option<&[u8]>, ticket: Ticket) {
        self.preload.outstanding -= 1;
        self.reads_in_flight -= 1;
        if let Some(data) = data {
            let first = offset / BLOCK;
            for (k, page) in data.chunks_exact(BLOCK as usize).enumerate() {
                let b = first + k as u64;
                if self.written_after(b, ticket) {
                    self.preload.skipped_blocks += 1;
                } else if self.cache.fill_if_absent(b, page) {
                    self.preload.loaded_blocks += 1;
                }
            }
        }
        self.forget_writes_if_idle();
        self.preload.finish_if_done(now);
    }

    fn issue(&mut self) -> Ticket {
        self.reads_in_flight += 1;
        Ticket {
            seq: self.write_seq,
        }
    }

    fn written_after(&self, block: u64, ticket: Ticket) -> bool {
        self.options.safeguards.tickets
            && self.written_at.get(&block).is_some_and(|s| *s > ticket.seq)
    }

    fn forget_writes_if_idle(&mut self) {
        if self.reads_in_flight == 0 {
            self.written_at.clear();
        }
    }

    /// A write event (arrival or completion) on `length` bytes at `offset`.
    fn stamp(&mut self, offset: u64, length: u64) {
        self.write_seq += 1;
        if self.reads_in_flight == 0 {
            return;
        }
        let (first, n) = blocks_of(offset, length);
        for b in first..first + n {
            self.written_at.insert(b, self.write_seq);
        }
    }

    /// A read arrives: its data on a hit, else a ticket for [`WarmCache::read_done`].
    pub fn read(&mut self, offset: u64, length: u64) -> Result<Vec<u8>, Ticket> {
        let out = self.read_step(offset, length);
        self.check_invariants();
        out
    }

    fn read_step(&mut self, offset: u64, length: u64) -> Result<Vec<u8>, Ticket> {
        let (first, n) = blocks_of(offset, length);
        let c = &mut self.counters;
        c.read_requests += 1;
        c.read_blocks += n;
        if n > 0 && self.cache.holds(first, n) {
            let mut out = Vec::with_capacity((n * BLOCK) as usize);
            self.cache.read(first, n, &mut out);
            c.read_hits += 1;
            c.hit_blocks += n;
            // An unaligned read: its bytes of the whole blocks.
            let skip = (offset - first * BLOCK) as usize;
            out.truncate(skip + length as usize);
            out.drain(..skip);
            return Ok(out);
        }
        // A read the cache holds only part of is read whole from the volume: no block of it
        // counts as a hit.
        Err(self.issue())
    }

    /// A missed read answered by the volume (`None`: it failed).
    pub fn read_done(&mut self, offset: u64, data: Option<&[u8]>, ticket: Ticket) {
        self.read_done_step(offset, data, ticket);
        self.check_invariants();
    }

    fn read_done_step(&mut self, offset: u64, data: Option<&[u8]>, ticket: Ticket) {
        self.reads_in_flight -= 1;
        if let Some(data) = data {
            let (first, n, skip) = whole_blocks(offset, data.len() as u64);
            if n > 0 {
                let pages = &data[skip as usize..(skip + n * BLOCK) as usize];
                let mut overtaken = false;
                for (k, page) in pages.chunks_exact(BLOCK as usize).enumerate() {
                    let b = first + k as u64;
                    if self.written_after(b, ticket) {
                        overtaken = true;
                    } else {
                        self.cache.fill(b, page);
                    }
                }
                // A write that overtook the read is logged already, and the read's data may be
                // older: then log the read without its data.
                self.record(
                    Entry {
                        block: first,
                        blocks: n as u32,
                        write: false,
                    },
                    (!overtaken).then_some(pages),
                );
            }
        }
        self.forget_writes_if_idle();
    }

    /// A write arrives (before the volume has it).
    pub fn write_arrived(&mut self, offset: u64, length: u64) {
        self.write_arrived_step(offset, length);
        self.check_invariants();
    }

    fn write_arrived_step(&mut self, offset: u64, length: u64) {
        self.stamp(offset, length);
        let (first, n) = blocks_of(offset, length);
        for b in first..first + n {
            let (count, contested) = self.writes_in_flight.entry(b).or_insert((0, false));
            *count += 1;
            *contested |= *count > 1;
        }
    }

    /// A write's answer: the blocks of `[first, first + n)` it shared with another write in
    /// flight at once (safeguard 4), as runs; its own count leaves each block.
    fn write_left(&mut self, first: u64, n: u64) -> Vec<(u64, u64)> {
        let mut contested: Vec<(u64, u64)> = Vec::new();
        for b in first..first + n {
            let Some((count, shared)) = self.writes_in_flight.get_mut(&b) else {
                continue;
            };
            let shared = *shared;
            *count -= 1;
            if *count == 0 {
                self.writes_in_flight.remove(&b);
            }
            if shared && self.options.safeguards.concurrent_writes {
                match contested.last_mut() {
                    Some((lo, len)) if *lo + *len == b => *len += 1,
                    _ => contested.push((b, 1)),
                }
            }
        }
        contested
    }

    /// Blocks changed in a way the log cannot hold (partly, by zeroes, or by a write that
    /// failed): invalidated, and logged without data so that a pre-load reads them from the
    /// volume rather than use an older logged copy.
    fn changed_without_data(&mut self, first: u64, n: u64) {
        if n == 0 || !self.options.safeguards.changes_without_data {
            return;
        }
        self.cache.invalidate(first, n);
        self.record(
            Entry {
                block: first,
                blocks: n as u32,
                write: true,
            },
            None,
        );
    }

    /// Zeroes written (or not) over `[offset, offset + length)`.
    pub fn zeroes_done(&mut self, offset: u64, length: u64) {
        self.zeroes_done_step(offset, length);
        self.check_invariants();
    }

    fn zeroes_done_step(&mut self, offset: u64, length: u64) {
        self.stamp(offset, length);
        let (first, n) = blocks_of(offset, length);
        self.write_left(first, n);
        self.changed_without_data(first, n);
    }

    /// A write answered: `data` is what was written; `ok` whether the volume has it.
    pub fn write_done(&mut self, offset: u64, data: &[u8], ok: bool) {
        self.write_done_step(offset, data, ok);
        self.check_invariants();
    }

    fn write_done_step(&mut self, offset: u64, data: &[u8], ok: bool) {
        self.stamp(offset, data.len() as u64);
        let (first, n) = blocks_of(offset, data.len() as u64);
        let contested = self.write_left(first, n);
        if !ok {
            self.changed_without_data(first, n);
            return;
        }
        let (whole, count, skip) = whole_blocks(offset, data.len() as u64);
        if count < n {
            // Partial blocks at an end: the whole range without data first, so that the
            // whole blocks' entry below is the newer one for them.
            self.changed_without_data(first, n);
        }
        if count > 0 {
            let pages = &data[skip as usize..(skip + count * BLOCK) as usize];
            self.cache.fill(whole, pages);
            self.record(
                Entry {
                    block: whole,
                    blocks: count as u32,
                    write: true,
                },
                Some(pages),
            );
        }
        // Blocks another write shared: which one the volume keeps is not known here.
        for (lo, len) in contested {
            self.changed_without_data(lo, len);
        }
    }

    /// Once a second: closes a hit-rate sample every [`SAMPLE_S`] seconds.
    pub fn handle_tick(&mut self, now: u64) {
        self.handle_tick_step(now);
        self.check_invariants();
    }

    fn handle_tick_step(&mut self, now: u64) {
        self.counters.tick(now / NANOS_PER_S);
    }

    /// The cached, valid blocks and their contents (checks and tests).
    pub fn cached_blocks(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.cache.valid_pages()
    }

    /// Pre-load reads not yet answered, and whether the pre-load is over.
    pub fn preload_progress(&self) -> (usize, bool) {
        (self.preload.outstanding, self.preload.seconds.is_some())
    }

    pub fn preload_planned_blocks(&self) -> u64 {
        self.preload.planned_blocks
    }

    pub fn preload_loaded_blocks(&self) -> u64 {
        self.preload.loaded_blocks
    }
}

#[cfg(test)]
mod tests;
