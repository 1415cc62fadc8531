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
//! # Its face
//!
//! Every public method of [`WarmCache`] is in this file: **lifecycle** (`open`,
//! `load_snapshot`, `handle_reset`, `handle_close`), **requests** (`read`, `read_done`,
//! `write_arrived`, `write_done`, `zeroes_done`), **answers and time** (`handle_log_done`,
//! `handle_volume_flushed`, `preload_done`, `fail_log`, `handle_tick`), **work out**
//! (`poll_io`), **control** (`hold_preload`) and **queries**; each event ends with the state
//! checked in debug builds (`invariants.rs`). The work is in `start.rs` (reading the log and
//! planning the pre-load), `preload.rs`, `requests.rs` and `log.rs` (writing the log and the
//! clean close).
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
mod log;
mod preload;
mod requests;
mod start;
mod status;

use rustc_hash::FxHashMap;
use std::collections::VecDeque;

pub use start::{run_in_memory, LogReader, MemoryLog};
use status::{Counters, Preload};
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
    written_at: FxHashMap<u64, u64>,
    reads_in_flight: usize,
    /// Block → writes to it in flight (arrived, not answered), and whether two of them were
    /// in flight at once since it last had none (safeguard 4).
    writes_in_flight: FxHashMap<u64, (u32, bool)>,
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
    // ---- Lifecycle: open (reading the log), the snapshot before the first request, a new cache, close

    /// A new cache. With a log (`log`), reads it and plans the pre-load, and asks for the log to
    /// be marked not clean: serve nothing before [`WarmCache::is_ready`]. A log that cannot be
    /// used means on-demand warm-up (said in [`WarmCache::source`]); only bad options are
    /// errors.
    pub fn open(
        now: u64,
        options: Options,
        log: Option<&mut dyn LogReader>,
    ) -> Result<WarmCache, String> {
        let blocks = (options.cache_bytes / BLOCK) as usize;
        if blocks < 1 {
            return Err("the cache must be at least 4 KiB".into());
        }
        if blocks >= u32::MAX as usize {
            return Err("the cache is over 16 TiB, its limit".into());
        }
        let mut c = WarmCache {
            cache: DataCache::new(blocks),
            log: None,
            phase: Phase::Running,
            out: Default::default(),
            next_id: 0,
            write_seq: 0,
            written_at: Default::default(),
            reads_in_flight: 0,
            writes_in_flight: Default::default(),
            counters: Counters::default(),
            preload: Preload::new(now, WarmupSource::None),
            preload_held: false,
            log_writing: Vec::new(),
            log_held: Default::default(),
            options,
        };
        let Some(log) = log else {
            c.preload.seconds = Some(0.0);
            return Ok(c);
        };
        if let Err(e) = c.start_log(now, log) {
            tracing::warn!(error = %e, "warm-up log unavailable; the cache warms on demand");
            c.log = None;
            c.out.clear();
            c.phase = Phase::Running;
            c.preload.fall_back(now, e);
        }
        Ok(c)
    }

    /// The snapshot's pages go into the cache; call before serving any request.
    pub fn load_snapshot(&mut self, now: u64) {
        self.load_snapshot_step(now);
        self.check_invariants();
    }

    /// Replaces the cache with an empty one of the same size and pre-loads it while running (a
    /// new cache, §5.2): from the log (read through `log`) and the staging buffer, or the
    /// staging buffer only when the log is unavailable, or on demand without either. The blocks
    /// are read from the volume: logged data is not known to be current while the server runs.
    pub fn handle_reset(&mut self, now: u64, warmup_bytes: u64, log: Option<&mut dyn LogReader>) {
        self.handle_reset_step(now, warmup_bytes, log);
        self.check_invariants();
    }

    /// Starts a clean close: the volume made durable, the staged entries written, then the log
    /// marked clean. Serve nothing after this.
    pub fn handle_close(&mut self, _now: u64) {
        self.handle_close_step(_now);
        self.check_invariants();
    }

    // ---- Requests through the cache

    /// A read arrives: its data on a hit, else a ticket for [`WarmCache::read_done`].
    pub fn read(&mut self, offset: u64, length: u64) -> Result<Vec<u8>, Ticket> {
        let out = self.read_step(offset, length);
        self.check_invariants();
        out
    }

    /// A missed read answered by the volume (`None`: it failed).
    pub fn read_done(&mut self, offset: u64, data: Option<&[u8]>, ticket: Ticket) {
        self.read_done_step(offset, data, ticket);
        self.check_invariants();
    }

    /// A write arrives (before the volume has it).
    pub fn write_arrived(&mut self, offset: u64, length: u64) {
        self.write_arrived_step(offset, length);
        self.check_invariants();
    }

    /// A write answered: `data` is what was written; `ok` whether the volume has it.
    pub fn write_done(&mut self, offset: u64, data: &[u8], ok: bool) {
        self.write_done_step(offset, data, ok);
        self.check_invariants();
    }

    /// Zeroes written (or not) over `[offset, offset + length)`.
    pub fn zeroes_done(&mut self, offset: u64, length: u64) {
        self.zeroes_done_step(offset, length);
        self.check_invariants();
    }

    // ---- Answers from the devices, and time

    /// A log command answered.
    pub fn handle_log_done(&mut self, now: u64, id: u64, result: Result<(), String>) {
        self.handle_log_done_step(now, id, result);
        self.check_invariants();
    }

    /// The volume flush asked for by the close answered.
    pub fn handle_volume_flushed(&mut self, _now: u64, result: Result<(), String>) {
        self.handle_volume_flushed_step(_now, result);
        self.check_invariants();
    }

    /// A pre-load read answered (`None`: it failed; the blocks stay out).
    pub fn preload_done(&mut self, now: u64, offset: u64, data: Option<&[u8]>, ticket: Ticket) {
        self.preload_done_step(now, offset, data, ticket);
        self.check_invariants();
    }

    /// The log can no longer be written (its writer is gone): every command outstanding failed.
    pub fn fail_log(&mut self, now: u64, why: String) {
        self.fail_log_step(now, why);
        self.check_invariants();
    }

    /// Once a second: closes a hit-rate sample every [`SAMPLE_S`] seconds.
    pub fn handle_tick(&mut self, now: u64) {
        self.handle_tick_step(now);
        self.check_invariants();
    }

    // ---- Work out

    /// The next thing to do.
    pub fn poll_io(&mut self) -> Option<CacheIo> {
        if self.out.is_empty() && self.phase == Phase::Running && !self.preload_held {
            self.issue_preload_reads();
        }
        self.out.pop_front()
    }

    // ---- Control

    /// Holds the pre-load's reads back (or lets them go): a driver whose volume cannot serve
    /// reads yet, or is stopping, holds them.
    pub fn hold_preload(&mut self, hold: bool) {
        self.hold_preload_step(hold);
        self.check_invariants();
    }

    // ---- Queries

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

    /// The cached, valid blocks and their contents (checks and tests).
    pub fn cached_blocks(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.cache.valid_pages()
    }

    /// [`WarmCache::cached_blocks`], each with the number of its page's last change (see
    /// [`DataCache::valid_pages_numbered`]).
    pub fn cached_blocks_numbered(&self) -> impl Iterator<Item = (u64, u64, &[u8])> {
        self.cache.valid_pages_numbered()
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
