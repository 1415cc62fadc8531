//! The volume server's storage-level cache with Bonfire below it (§5): a DRAM block cache above
//! the volume, the monitoring of every I/O below the cache (cache loads after read misses, and
//! writes) into staging buffers and a circular warm-up log, and the pre-load of a new (empty)
//! cache from that log when the server starts. The log format and the pre-load plan are
//! `cordillera_warmup::wlog`; this file does their I/O and keeps the cache coherent.
//!
//! Coherence:
//! - reads that hit are answered from the cache; a miss is read from the volume (through the
//!   off-load client, so off-loaded data is found) and fills the cache;
//! - a write fills the cache when the volume acknowledges it (whole blocks; a partial block is
//!   invalidated), and a failed write invalidates what it touched;
//! - a read (a miss, or a pre-load read) fills a block only if no write to that block arrived
//!   after the read was issued, so a slow read never puts old contents over a newer write;
//! - the pre-load never replaces a cached block, and uses logged data only when the log was
//!   closed cleanly (`wlog` explains why); otherwise it reads the blocks from the volume.
//!
//! Fallbacks: no log configured, or a log that cannot be opened or read, means on-demand
//! warm-up (the cache fills from misses); a log write that fails stops the logging (the staging
//! buffer keeps being filled and flushed to nowhere) and is reported in the status.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::Seek;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use cordillera_warmup::data_cache::DataCache;
use cordillera_warmup::wlog::{self, ChunkWrite, Entry, Monitor, Superblock};

const BLOCK: u64 = 4096;
/// Pre-load reads outstanding, and their largest size.
const PRELOAD_DEPTH: usize = 32;
const PRELOAD_READ_BLOCKS: u64 = 256;
/// Hit-rate samples: one per this many seconds, the last hour of them.
pub const SAMPLE_S: u64 = 10;
const SAMPLES: usize = 360;

#[derive(Clone, Debug)]
pub struct CacheOptions {
    pub cache_bytes: u64,
    /// The warm-up log file (created if absent); `None`: no monitoring, on-demand warm-up.
    pub log: Option<PathBuf>,
    /// Size of a new log file.
    pub log_bytes: u64,
    /// Log the data too (the performance snapshot, metadata+data).
    pub log_data: bool,
    /// How much to pre-load at start.
    pub warmup_bytes: u64,
    pub metadata_buffer_bytes: usize,
    pub data_buffer_bytes: usize,
}

impl CacheOptions {
    pub fn new(cache_bytes: u64) -> CacheOptions {
        CacheOptions {
            cache_bytes,
            log: None,
            log_bytes: 64 << 20,
            log_data: false,
            warmup_bytes: cache_bytes / 4,
            metadata_buffer_bytes: 256 << 10,
            data_buffer_bytes: 128 << 20,
        }
    }
}

enum LogCommand {
    Write(ChunkWrite),
    /// Write the clean superblock after everything before it, then answer.
    Close(Superblock, std_mpsc::Sender<std::io::Result<()>>),
}

/// The log's writer thread: chunks are written in order; no sync (the log is a hint, and only
/// a clean close makes its data trusted, after a sync).
struct LogWriter {
    tx: std_mpsc::Sender<LogCommand>,
    failed: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
}

impl LogWriter {
    fn start(file: Arc<File>) -> LogWriter {
        let (tx, rx) = std_mpsc::channel::<LogCommand>();
        let failed = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let (f2, e2) = (failed.clone(), error.clone());
        std::thread::Builder::new()
            .name("warmup-log".into())
            .spawn(move || {
                for command in rx {
                    match command {
                        LogCommand::Write(c) => {
                            if f2.load(Ordering::Relaxed) {
                                continue;
                            }
                            if let Err(e) = file.write_all_at(&c.bytes, c.offset) {
                                tracing::warn!(error = %e, "warm-up log write failed; logging stops");
                                *e2.lock().expect("no panics") = Some(e.to_string());
                                f2.store(true, Ordering::Relaxed);
                            }
                        }
                        LogCommand::Close(sb, done) => {
                            let r = if f2.load(Ordering::Relaxed) {
                                Err(std::io::Error::other("the log failed earlier"))
                            } else {
                                file.sync_data()
                                    .and_then(|_| file.write_all_at(&sb.encode(), 0))
                                    .and_then(|_| file.sync_data())
                            };
                            let _ = done.send(r);
                        }
                    }
                }
            })
            .expect("a thread");
        LogWriter { tx, failed, error }
    }
}

/// Where the pre-load comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WarmupSource {
    /// A cache replaced while running, the log unavailable: the staging buffer's entries.
    StagingOnly(String),
    /// No log configured.
    None,
    /// A new log (nothing to pre-load yet).
    NewLog,
    /// The log's metadata; data read from the volume.
    Log,
    /// The log closed cleanly: its data (the performance snapshot) and metadata.
    LogWithData,
    /// The log could not be used: on-demand warm-up.
    Fallback(String),
}

impl std::fmt::Display for WarmupSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WarmupSource::None => f.write_str("none (no warm-up log)"),
            WarmupSource::NewLog => f.write_str("none (new warm-up log)"),
            WarmupSource::Log => f.write_str("log (metadata-only: blocks read from the volume)"),
            WarmupSource::LogWithData => {
                f.write_str("log with data (metadata+data: the performance snapshot)")
            }
            WarmupSource::Fallback(why) => write!(f, "on-demand ({why})"),
            WarmupSource::StagingOnly(why) => {
                write!(
                    f,
                    "staging buffer only ({why}): blocks read from the volume"
                )
            }
        }
    }
}

/// A read that may fill the cache: the write sequence number when it was issued.
#[derive(Clone, Copy, Debug)]
pub struct Ticket {
    seq: u64,
}

pub struct WarmCache {
    cache: DataCache,
    monitor: Option<Monitor>,
    writer: Option<LogWriter>,
    superblock: Option<Superblock>,
    /// Writes arrived so far.
    write_seq: u64,
    /// Block → the sequence number of its latest write, kept while reads are in flight.
    written_at: HashMap<u64, u64>,
    reads_in_flight: usize,
    // Counters.
    read_requests: u64,
    read_hits: u64,
    read_blocks: u64,
    hit_blocks: u64,
    /// (read blocks, hit blocks) per SAMPLE_S seconds since start, the last hour.
    samples: VecDeque<(u64, u64)>,
    sample_base: (u64, u64),
    samples_taken: u64,
    // The pre-load.
    source: WarmupSource,
    /// Blocks to read from the volume, sorted; `next` is the first not yet issued.
    preload_blocks: Vec<u64>,
    preload_next: usize,
    preload_outstanding: usize,
    /// Snapshot pages, loaded at start.
    snapshot: Vec<(u64, Vec<u8>)>,
    pub preload_planned_blocks: u64,
    pub preload_loaded_blocks: u64,
    preload_skipped_blocks: u64,
    preload_started: Instant,
    preload_seconds: Option<f64>,
    log_path: Option<PathBuf>,
    /// Chunks and bytes handed to the log writer since start.
    log_chunks: u64,
    log_bytes: u64,
    /// The log, for reading it again when the cache is replaced while running.
    log_file: Option<Arc<File>>,
    /// The configured warm-up size.
    pub warmup_bytes: u64,
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
    /// Opens the cache and its log, reads the log and plans the pre-load; the log is marked
    /// not clean (durably) before this returns, so it must return before any write is served.
    /// Blocking.
    pub fn open(o: &CacheOptions) -> Result<WarmCache> {
        let blocks = (o.cache_bytes / BLOCK) as usize;
        anyhow::ensure!(blocks >= 1, "--cache-size must be at least 4 KiB");
        anyhow::ensure!(
            blocks < u32::MAX as usize,
            "--cache-size is over 16 TiB, the cache's limit"
        );
        let mut c = WarmCache {
            cache: DataCache::new(blocks),
            monitor: None,
            writer: None,
            superblock: None,
            write_seq: 0,
            written_at: HashMap::new(),
            reads_in_flight: 0,
            read_requests: 0,
            read_hits: 0,
            read_blocks: 0,
            hit_blocks: 0,
            samples: VecDeque::new(),
            sample_base: (0, 0),
            samples_taken: 0,
            source: WarmupSource::None,
            preload_blocks: Vec::new(),
            preload_next: 0,
            preload_outstanding: 0,
            snapshot: Vec::new(),
            preload_planned_blocks: 0,
            preload_loaded_blocks: 0,
            preload_skipped_blocks: 0,
            preload_started: Instant::now(),
            preload_seconds: None,
            log_path: o.log.clone(),
            log_chunks: 0,
            log_bytes: 0,
            log_file: None,
            warmup_bytes: o.warmup_bytes,
        };
        let Some(path) = &o.log else {
            c.preload_seconds = Some(0.0);
            return Ok(c);
        };
        match c.open_log(path, o) {
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(log = %path.display(), error = %format!("{e:#}"), "warm-up log unavailable; the cache warms on demand");
                c.source = WarmupSource::Fallback(format!("{e:#}"));
                c.monitor = None;
                c.writer = None;
                c.preload_seconds = Some(0.0);
            }
        }
        Ok(c)
    }

    fn open_log(&mut self, path: &PathBuf, o: &CacheOptions) -> Result<()> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        // A block device's size is where its end is (its metadata says 0).
        let device = file.metadata()?.file_type().is_block_device();
        let len = (&file).seek(std::io::SeekFrom::End(0))?;
        let mut head = vec![0u8; wlog::PAGE as usize];
        let existing = if len >= wlog::PAGE {
            file.read_exact_at(&mut head, 0)?;
            match Superblock::decode(&head) {
                Ok(sb) if sb.capacity <= len => Some(sb),
                Ok(sb) => {
                    tracing::warn!(log = %path.display(), capacity = sb.capacity, len, "warm-up log shorter than its superblock says; starting a new log");
                    None
                }
                Err(wlog::LogError::NoSuperblock) => None,
                Err(e) => {
                    tracing::warn!(log = %path.display(), error = %e, "starting a new warm-up log");
                    None
                }
            }
        } else {
            None
        };
        let warm_blocks = (o.warmup_bytes / BLOCK) as usize;
        let (sb, after) = match existing {
            Some(sb) => {
                let chunks =
                    scan_log(&file, sb).with_context(|| format!("reading {}", path.display()))?;
                let use_data = sb.clean && sb.data;
                let plan = wlog::plan(&chunks, &[], warm_blocks, use_data);
                let mut from_volume = plan.from_volume();
                // The snapshot's blocks: each chunk's data read once, in log order, and used
                // only if its CRC holds.
                let wanted = plan.from_snapshot();
                let mut k = 0;
                for c in &chunks_by_offset(&chunks) {
                    let end = c.data_offset + c.data_blocks * BLOCK;
                    let first = k;
                    while k < wanted.len() && wanted[k].1 < end {
                        k += 1;
                    }
                    if first == k {
                        continue;
                    }
                    let data = read_at(&file, c.data_offset, (c.data_blocks * BLOCK) as usize)
                        .with_context(|| format!("reading {}", path.display()))?;
                    if c.data_intact(&data) {
                        for &(b, at) in &wanted[first..k] {
                            let at = (at - c.data_offset) as usize;
                            self.snapshot
                                .push((b, data[at..at + BLOCK as usize].to_vec()));
                        }
                    } else {
                        tracing::warn!(log = %path.display(), chunk = c.seq, "warm-up log chunk data damaged; its blocks are read from the volume");
                        from_volume.extend(wanted[first..k].iter().map(|(b, _)| *b));
                    }
                }
                from_volume.sort_unstable();
                self.preload_blocks = from_volume;
                self.preload_planned_blocks = plan.blocks.len() as u64;
                self.source = if use_data {
                    WarmupSource::LogWithData
                } else {
                    WarmupSource::Log
                };
                tracing::info!(
                    log = %path.display(),
                    chunks = chunks.len(),
                    clean = sb.clean,
                    planned_blocks = plan.blocks.len(),
                    from_snapshot = self.snapshot.len(),
                    "warm-up log read"
                );
                (
                    Superblock {
                        clean: false,
                        data: o.log_data,
                        ..sb
                    },
                    wlog::resume_point(&chunks),
                )
            }
            None => {
                // A device is used whole; a file is sized to --warmup-log-size.
                let bytes = if device { len } else { o.log_bytes };
                let capacity = bytes / wlog::PAGE * wlog::PAGE;
                anyhow::ensure!(
                    capacity >= 16 * wlog::PAGE,
                    "the warm-up log must be at least 64 KiB (--warmup-log-size, or the device)"
                );
                if !device {
                    file.set_len(capacity)
                        .with_context(|| format!("sizing {}", path.display()))?;
                }
                self.source = WarmupSource::NewLog;
                (
                    Superblock {
                        instance: rand_id(),
                        capacity,
                        clean: false,
                        data: o.log_data,
                    },
                    None,
                )
            }
        };
        // Not clean from here on: a crash must not let the next start trust logged data.
        file.write_all_at(&sb.encode(), 0)?;
        file.sync_data()
            .with_context(|| format!("syncing {}", path.display()))?;
        self.superblock = Some(sb);
        self.monitor = Some(Monitor::new(
            sb,
            o.metadata_buffer_bytes,
            o.data_buffer_bytes,
            after,
        ));
        let file = Arc::new(file);
        self.log_file = Some(file.clone());
        self.writer = Some(LogWriter::start(file));
        Ok(())
    }

    pub fn source(&self) -> &WarmupSource {
        &self.source
    }

    fn record(&mut self, entry: Entry, data: Option<&[u8]>) {
        let Some(m) = self.monitor.as_mut() else {
            return;
        };
        if let Some(chunk) = m.record(entry, data) {
            if let Some(w) = &self.writer {
                self.log_chunks += 1;
                self.log_bytes += chunk.bytes.len() as u64;
                let _ = w.tx.send(LogCommand::Write(chunk));
            }
        }
    }

    /// The snapshot's pages go into the cache; call before serving any request.
    pub fn load_snapshot(&mut self) {
        for (block, page) in std::mem::take(&mut self.snapshot) {
            if self.cache.fill_if_absent(block, &page) {
                self.preload_loaded_blocks += 1;
            }
        }
        self.finish_preload_if_done();
    }

    fn finish_preload_if_done(&mut self) {
        if self.preload_seconds.is_none()
            && self.preload_next >= self.preload_blocks.len()
            && self.preload_outstanding == 0
            && self.snapshot.is_empty()
        {
            let s = self.preload_started.elapsed().as_secs_f64();
            self.preload_seconds = Some(s);
            tracing::info!(
                source = %self.source,
                planned_blocks = self.preload_planned_blocks,
                loaded_blocks = self.preload_loaded_blocks,
                loaded_bytes = self.preload_loaded_blocks * BLOCK,
                seconds = s,
                "cache pre-load finished"
            );
            self.preload_blocks = Vec::new();
        }
    }

    /// The next pre-load reads from the volume: (offset, length, ticket), runs of sorted
    /// blocks, up to the pre-load depth.
    pub fn next_preload_reads(&mut self) -> Vec<(u64, u64, Ticket)> {
        let mut out = Vec::new();
        while self.preload_outstanding < PRELOAD_DEPTH
            && self.preload_next < self.preload_blocks.len()
        {
            let start = self.preload_blocks[self.preload_next];
            let mut n = 1;
            while self.preload_next + (n as usize) < self.preload_blocks.len()
                && self.preload_blocks[self.preload_next + n as usize] == start + n
                && n < PRELOAD_READ_BLOCKS
            {
                n += 1;
            }
            self.preload_next += n as usize;
            self.preload_outstanding += 1;
            out.push((start * BLOCK, n * BLOCK, self.issue()));
        }
        out
    }

    /// A pre-load read answered (`None`: it failed; the blocks stay out).
    pub fn preload_done(&mut self, offset: u64, data: Option<&[u8]>, ticket: Ticket) {
        self.preload_outstanding -= 1;
        self.reads_in_flight -= 1;
        if let Some(data) = data {
            let first = offset / BLOCK;
            for (k, page) in data.chunks_exact(BLOCK as usize).enumerate() {
                let b = first + k as u64;
                if self.written_after(b, ticket) {
                    self.preload_skipped_blocks += 1;
                } else if self.cache.fill_if_absent(b, page) {
                    self.preload_loaded_blocks += 1;
                }
            }
        }
        self.forget_writes_if_idle();
        self.finish_preload_if_done();
    }

    fn issue(&mut self) -> Ticket {
        self.reads_in_flight += 1;
        Ticket {
            seq: self.write_seq,
        }
    }

    fn written_after(&self, block: u64, ticket: Ticket) -> bool {
        self.written_at.get(&block).is_some_and(|s| *s > ticket.seq)
    }

    fn forget_writes_if_idle(&mut self) {
        if self.reads_in_flight == 0 {
            self.written_at.clear();
        }
    }

    /// A read arrives: its data on a hit, else a ticket for [`WarmCache::read_done`].
    pub fn read(&mut self, offset: u64, length: u64) -> Result<Vec<u8>, Ticket> {
        let (first, n) = blocks_of(offset, length);
        self.read_requests += 1;
        self.read_blocks += n;
        if n > 0 && self.cache.holds(first, n) {
            let mut out = Vec::with_capacity((n * BLOCK) as usize);
            self.cache.read(first, n, &mut out);
            self.read_hits += 1;
            self.hit_blocks += n;
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
        self.write_seq += 1;
        if self.reads_in_flight == 0 {
            return;
        }
        let (first, n) = blocks_of(offset, length);
        for b in first..first + n {
            self.written_at.insert(b, self.write_seq);
        }
    }

    /// Blocks changed in a way the log cannot hold (partly, by zeroes, or by a write that
    /// failed): invalidated, and logged without data so that a pre-load reads them from the
    /// volume rather than use an older logged copy.
    fn changed_without_data(&mut self, first: u64, n: u64) {
        if n == 0 {
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

    /// Zeroes written (or not, if `ok` is false) over `[offset, offset + length)`.
    pub fn zeroes_done(&mut self, offset: u64, length: u64) {
        let (first, n) = blocks_of(offset, length);
        self.changed_without_data(first, n);
    }

    /// A write answered: `data` is what was written; `ok` whether the volume has it.
    pub fn write_done(&mut self, offset: u64, data: &[u8], ok: bool) {
        let (first, n) = blocks_of(offset, data.len() as u64);
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
    }

    /// Once a second: closes a hit-rate sample every SAMPLE_S seconds.
    pub fn tick(&mut self, since_start_s: u64) {
        let due = since_start_s / SAMPLE_S;
        if due > self.samples_taken {
            self.samples_taken = due;
            let now = (self.read_blocks, self.hit_blocks);
            self.samples
                .push_back((now.0 - self.sample_base.0, now.1 - self.sample_base.1));
            self.sample_base = now;
            while self.samples.len() > SAMPLES {
                self.samples.pop_front();
            }
        }
    }

    /// Replaces the cache with an empty one of the same size and pre-loads it while running
    /// (a new cache, §5.2): from the log and the staging buffer, or the staging buffer only when
    /// the log is unavailable, or on demand without either. The blocks are read from the
    /// volume: logged data is not known to be current while the server runs. Blocking (it
    /// reads the log's headers and entries).
    pub fn reset(&mut self, warmup_bytes: u64) {
        self.cache = DataCache::new(self.cache.capacity_blocks());
        let limit = (warmup_bytes / BLOCK) as usize;
        let staged: Vec<Entry> = self
            .monitor
            .as_ref()
            .map(|m| m.staged().copied().collect())
            .unwrap_or_default();
        let failed = self
            .writer
            .as_ref()
            .is_none_or(|w| w.failed.load(Ordering::Relaxed));
        let mut chunks = Vec::new();
        let mut why = None;
        match (&self.log_file, self.superblock, failed) {
            (Some(file), Some(sb), false) => match scan_log(file, sb) {
                Ok(c) => chunks = c,
                Err(e) => why = Some(format!("the log cannot be read: {e}")),
            },
            (Some(_), _, true) => why = Some("the log failed".into()),
            _ => why = Some("no log".into()),
        }
        let plan = wlog::plan(&chunks, &staged, limit, false);
        self.source = match (&why, staged.is_empty() && chunks.is_empty()) {
            (None, _) => WarmupSource::Log,
            (Some(w), false) => WarmupSource::StagingOnly(w.clone()),
            (Some(w), true) => WarmupSource::Fallback(w.clone()),
        };
        self.preload_blocks = plan.from_volume();
        self.preload_next = 0;
        self.snapshot.clear();
        self.preload_planned_blocks = plan.blocks.len() as u64;
        self.preload_loaded_blocks = 0;
        self.preload_skipped_blocks = 0;
        self.preload_started = Instant::now();
        self.preload_seconds = None;
        tracing::info!(
            source = %self.source,
            planned_blocks = self.preload_planned_blocks,
            "cache replaced; pre-loading"
        );
        self.finish_preload_if_done();
    }

    /// Flushes the staging buffer and closes the log cleanly (blocking until it is synced).
    pub fn close(&mut self) -> Result<()> {
        let (Some(m), Some(w), Some(sb)) = (self.monitor.as_mut(), &self.writer, self.superblock)
        else {
            return Ok(());
        };
        if let Some(chunk) = m.flush() {
            self.log_chunks += 1;
            self.log_bytes += chunk.bytes.len() as u64;
            let _ = w.tx.send(LogCommand::Write(chunk));
        }
        let (done, answer) = std_mpsc::channel();
        let clean = Superblock { clean: true, ..sb };
        w.tx.send(LogCommand::Close(clean, done))
            .map_err(|_| anyhow::anyhow!("the warm-up log writer stopped"))?;
        answer
            .recv()
            .map_err(|_| anyhow::anyhow!("the warm-up log writer stopped"))?
            .context("closing the warm-up log")?;
        self.monitor = None;
        Ok(())
    }

    pub fn status_json(&self) -> serde_json::Value {
        let rate = |hits: u64, all: u64| (all > 0).then(|| hits as f64 / all as f64);
        let log_error = self
            .writer
            .as_ref()
            .and_then(|w| w.error.lock().ok().and_then(|e| e.clone()));
        serde_json::json!({
            "capacity_bytes": self.cache.capacity_blocks() as u64 * BLOCK,
            "cached_blocks": self.cache.valid_blocks(),
            "read_requests": self.read_requests,
            "read_hits": self.read_hits,
            "read_blocks": self.read_blocks,
            "hit_blocks": self.hit_blocks,
            "hit_rate": rate(self.hit_blocks, self.read_blocks),
            "hit_rate_samples_s": SAMPLE_S,
            "hit_rates": self.samples.iter().map(|(r, h)| rate(*h, *r)).collect::<Vec<_>>(),
            "log": self.log_path.as_ref().map(|p| p.display().to_string()),
            "log_failed": self.writer.as_ref().is_some_and(|w| w.failed.load(Ordering::Relaxed)),
            "log_error": log_error,
            "staged_entries": self.monitor.as_ref().map_or(0, |m| m.staged_entries()),
            "log_chunks_written": self.log_chunks,
            "log_bytes_written": self.log_bytes,
            "warmup": {
                "source": self.source.to_string(),
                "planned_blocks": self.preload_planned_blocks,
                "loaded_blocks": self.preload_loaded_blocks,
                "loaded_bytes": self.preload_loaded_blocks * BLOCK,
                "skipped_blocks_written_meanwhile": self.preload_skipped_blocks,
                "done": self.preload_seconds.is_some(),
                "seconds": self.preload_seconds,
            },
        })
    }

    pub fn metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let mut metric = |name: &str, help: &str, kind: &str, value: f64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        metric(
            "cordillera_cache_read_blocks_total",
            "4 KiB blocks read through the cache.",
            "counter",
            self.read_blocks as f64,
        );
        metric(
            "cordillera_cache_hit_blocks_total",
            "4 KiB blocks the cache held when read.",
            "counter",
            self.hit_blocks as f64,
        );
        metric(
            "cordillera_cache_read_hits_total",
            "Read requests answered from the cache.",
            "counter",
            self.read_hits as f64,
        );
        metric(
            "cordillera_cache_blocks",
            "Valid blocks in the cache.",
            "gauge",
            self.cache.valid_blocks() as f64,
        );
        metric(
            "cordillera_cache_preload_loaded_bytes",
            "Bytes pre-loaded into the cache at start.",
            "gauge",
            (self.preload_loaded_blocks * BLOCK) as f64,
        );
        metric(
            "cordillera_cache_preload_seconds",
            "Time the pre-load took (-1 while it runs).",
            "gauge",
            self.preload_seconds.unwrap_or(-1.0),
        );
    }
}

fn read_at(file: &File, offset: u64, length: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; length];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// The log's intact chunks; holes of a sparse file are skipped (`SEEK_DATA`).
fn scan_log(file: &File, sb: Superblock) -> std::io::Result<Vec<wlog::Chunk>> {
    let fd = file.as_raw_fd();
    let next_data = |offset: u64| -> u64 {
        // SAFETY: lseek on an open descriptor; SEEK_DATA past the last data fails (ENXIO),
        // which means no more chunks: the end.
        let r = unsafe { libc::lseek(fd, offset as libc::off_t, libc::SEEK_DATA) };
        if r < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::ENXIO) => u64::MAX / 2,
                _ => offset,
            }
        } else {
            r as u64
        }
    };
    wlog::scan(
        sb.capacity,
        sb.instance,
        |offset, length| read_at(file, offset, length),
        next_data,
    )
}

/// Chunks ordered by where they lie in the log.
fn chunks_by_offset(chunks: &[wlog::Chunk]) -> Vec<&wlog::Chunk> {
    let mut v: Vec<&wlog::Chunk> = chunks.iter().collect();
    v.sort_by_key(|c| c.offset);
    v
}

fn rand_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(dir: &std::path::Path, data: bool) -> CacheOptions {
        CacheOptions {
            log: Some(dir.join("warm.log")),
            log_bytes: 1 << 20,
            log_data: data,
            warmup_bytes: 64 * BLOCK,
            ..CacheOptions::new(256 * BLOCK)
        }
    }

    fn page(v: u8) -> Vec<u8> {
        vec![v; BLOCK as usize]
    }

    #[test]
    fn a_slow_read_never_fills_over_a_newer_write() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = WarmCache::open(&options(dir.path(), true)).unwrap();
        let t = c.read(0, BLOCK).unwrap_err();
        c.write_arrived(0, BLOCK);
        c.write_done(0, &page(2), true);
        // The read returns the old contents after the write: the cache keeps the write's.
        c.read_done(0, Some(&page(1)), t);
        assert_eq!(c.read(0, BLOCK).unwrap(), page(2));
        // ...and the log does not hold the read's old data as the newer copy.
        c.close().unwrap();
        let mut again = WarmCache::open(&options(dir.path(), true)).unwrap();
        assert_eq!(again.source(), &WarmupSource::LogWithData);
        again.load_snapshot();
        // Block 0's newest logged copy is the write's (2): the read's entry carries no data.
        assert_eq!(again.preload_loaded_blocks, 0);
        assert_eq!(again.next_preload_reads().len(), 1);
        drop(again);
        let mut c = WarmCache::open(&options(dir.path(), false)).unwrap();
        // A failed write invalidates; a partial write invalidates its block.
        c.write_arrived(0, BLOCK);
        c.write_done(0, &page(3), false);
        assert!(c.read(0, BLOCK).is_err());
        c.write_done(BLOCK, &page(4), true);
        c.write_done(BLOCK + 10, &[9u8; 100], true);
        assert!(c.read(BLOCK, BLOCK).is_err());
        // Unaligned reads are served from whole cached blocks.
        c.write_done(4 * BLOCK, &[page(5), page(6)].concat(), true);
        assert_eq!(c.read(4 * BLOCK + 4000, 200).unwrap(), {
            let mut v = vec![5u8; 96];
            v.extend(vec![6u8; 104]);
            v
        });
    }

    #[test]
    fn a_clean_log_preloads_its_data_and_a_crashed_one_reads_the_volume() {
        let dir = tempfile::tempdir().unwrap();
        let o = options(dir.path(), true);
        let mut c = WarmCache::open(&o).unwrap();
        assert_eq!(c.source(), &WarmupSource::NewLog);
        for b in 0..8u64 {
            c.write_done(b * BLOCK, &page(b as u8), true);
        }
        c.write_done(3 * BLOCK, &page(33), true);
        c.close().unwrap();
        drop(c);
        let mut c = WarmCache::open(&o).unwrap();
        assert_eq!(c.source(), &WarmupSource::LogWithData);
        assert_eq!(c.preload_planned_blocks, 8);
        c.load_snapshot();
        assert_eq!(c.preload_loaded_blocks, 8);
        assert!(c.next_preload_reads().is_empty());
        // Block 3 has its newest contents.
        assert_eq!(c.read(3 * BLOCK, BLOCK).unwrap(), page(33));
        // Not closed: a "crash". The next start reads every block from the volume.
        c.write_done(5 * BLOCK, &page(55), true);
        drop(c);
        let mut c = WarmCache::open(&o).unwrap();
        assert_eq!(c.source(), &WarmupSource::Log);
        c.load_snapshot();
        assert_eq!(c.preload_loaded_blocks, 0);
        let reads = c.next_preload_reads();
        assert_eq!(reads.len(), 1);
        assert_eq!((reads[0].0, reads[0].1), (0, 8 * BLOCK));
        // A write to block 2 arrives while the pre-load read is out: block 2 is not loaded.
        c.write_arrived(2 * BLOCK, BLOCK);
        let volume: Vec<u8> = (0..8u8).flat_map(page).collect();
        c.preload_done(0, Some(&volume), reads[0].2);
        assert_eq!(c.preload_loaded_blocks, 7);
        assert!(c.read(2 * BLOCK, BLOCK).is_err());
        assert_eq!(c.status_json()["warmup"]["done"], true);
    }

    #[test]
    fn partial_writes_and_zeroes_are_never_preloaded_from_older_logged_data() {
        let dir = tempfile::tempdir().unwrap();
        let o = options(dir.path(), true);
        let mut c = WarmCache::open(&o).unwrap();
        c.write_done(0, &page(1), true);
        c.write_done(BLOCK, &page(2), true);
        c.write_done(2 * BLOCK, &page(3), true);
        // Block 0 changed partly, block 1 zeroed, block 2 a write that failed.
        c.write_done(100, &[7u8; 10], true);
        c.zeroes_done(BLOCK, BLOCK);
        c.write_done(2 * BLOCK, &page(9), false);
        c.close().unwrap();
        drop(c);
        let mut c = WarmCache::open(&o).unwrap();
        assert_eq!(c.source(), &WarmupSource::LogWithData);
        c.load_snapshot();
        assert_eq!(
            c.preload_loaded_blocks, 0,
            "no logged data is the blocks' contents"
        );
        let reads = c.next_preload_reads();
        assert_eq!((reads[0].0, reads[0].1), (0, 3 * BLOCK));
    }

    #[test]
    fn a_cache_replaced_while_running_is_warmed_from_the_log_or_the_staging_buffer() {
        let dir = tempfile::tempdir().unwrap();
        // A metadata buffer of 16 entries: the first 16 writes reach the log, the rest stay
        // staged.
        let o = CacheOptions {
            metadata_buffer_bytes: 16 * 16,
            ..options(dir.path(), false)
        };
        let mut c = WarmCache::open(&o).unwrap();
        for b in 0..20u64 {
            c.write_done(b * BLOCK, &page(b as u8), true);
        }
        // Let the writer thread write the chunk.
        std::thread::sleep(std::time::Duration::from_millis(200));
        c.reset(64 * BLOCK);
        assert_eq!(c.source(), &WarmupSource::Log);
        assert_eq!(c.preload_planned_blocks, 20, "16 from the log, 4 staged");
        assert!(c.read(0, BLOCK).is_err(), "the new cache starts empty");
        let reads = c.next_preload_reads();
        assert_eq!((reads[0].0, reads[0].1), (0, 20 * BLOCK));
        // The log fails: only the staged entries are left.
        c.writer
            .as_ref()
            .unwrap()
            .failed
            .store(true, Ordering::Relaxed);
        c.preload_done(0, None, reads[0].2);
        c.reset(64 * BLOCK);
        assert!(
            matches!(c.source(), WarmupSource::StagingOnly(_)),
            "{:?}",
            c.source()
        );
        assert_eq!(c.preload_planned_blocks, 4);
        // Without a log at all: on demand.
        let mut bare = WarmCache::open(&CacheOptions::new(64 * BLOCK)).unwrap();
        bare.reset(64 * BLOCK);
        assert!(matches!(bare.source(), WarmupSource::Fallback(_)));
        assert_eq!(bare.status_json()["warmup"]["done"], true);
    }

    #[derive(Clone, Debug)]
    enum Step {
        /// A whole-block write of `blocks` blocks at `block`.
        Write {
            block: u64,
            blocks: u64,
        },
        /// A write of part of a block.
        Partial {
            block: u64,
        },
        Zeroes {
            block: u64,
        },
        /// A read that misses, answered after the next `delay` steps.
        Read {
            block: u64,
            delay: usize,
        },
        FailedWrite {
            block: u64,
        },
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0u64..12, 1u64..4).prop_map(|(block, blocks)| Step::Write { block, blocks }),
            1 => (0u64..12).prop_map(|block| Step::Partial { block }),
            1 => (0u64..12).prop_map(|block| Step::Zeroes { block }),
            3 => (0u64..12, 0usize..6).prop_map(|(block, delay)| Step::Read { block, delay }),
            1 => (0u64..12).prop_map(|block| Step::FailedWrite { block }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Whatever the I/O and however the server stops (cleanly or by a crash), what the next
        /// start puts in the cache (from the snapshot, or read from the volume) is each block's
        /// current contents.
        #[test]
        fn a_restart_never_preloads_stale_contents(
            steps in proptest::collection::vec(step(), 1..120),
            clean: bool,
            data: bool,
            small_buffers: bool,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let o = CacheOptions {
                metadata_buffer_bytes: if small_buffers { 8 * 16 } else { 256 << 10 },
                data_buffer_bytes: if small_buffers { 4 * BLOCK as usize } else { 128 << 20 },
                log_bytes: 64 * BLOCK,
                warmup_bytes: 64 * BLOCK,
                ..options(dir.path(), data)
            };
            // The volume: block → contents (a version byte); absent blocks are zeros.
            let mut volume: HashMap<u64, u8> = HashMap::new();
            let mut version = 0u8;
            let contents = |v: &HashMap<u64, u8>, b: u64| vec![*v.get(&b).unwrap_or(&0); BLOCK as usize];
            let mut c = WarmCache::open(&o).unwrap();
            // Reads in flight: (answer at step, block, ticket, contents when read).
            let mut reads: Vec<(usize, u64, Ticket, Vec<u8>)> = Vec::new();
            for (at, s) in steps.iter().enumerate() {
                let due: Vec<_> = reads.iter().filter(|r| r.0 <= at).cloned().collect();
                reads.retain(|r| r.0 > at);
                for (_, b, t, old) in due {
                    c.read_done(b * BLOCK, Some(&old), t);
                }
                version = version.wrapping_add(1).max(1);
                match *s {
                    Step::Write { block, blocks } => {
                        c.write_arrived(block * BLOCK, blocks * BLOCK);
                        for b in block..block + blocks {
                            volume.insert(b, version);
                        }
                        c.write_done(block * BLOCK, &vec![version; (blocks * BLOCK) as usize], true);
                    }
                    Step::Partial { block } => {
                        c.write_arrived(block * BLOCK + 100, 10);
                        // The model keeps whole-block contents: the partial write makes the
                        // block's contents a new version (as if those bytes changed).
                        volume.insert(block, version);
                        c.write_done(block * BLOCK + 100, &[version; 10], true);
                    }
                    Step::Zeroes { block } => {
                        c.write_arrived(block * BLOCK, BLOCK);
                        volume.insert(block, 0);
                        c.zeroes_done(block * BLOCK, BLOCK);
                    }
                    Step::FailedWrite { block } => {
                        // The volume may or may not have it: say it does (the worse case).
                        c.write_arrived(block * BLOCK, BLOCK);
                        volume.insert(block, version);
                        c.write_done(block * BLOCK, &vec![version; BLOCK as usize], false);
                    }
                    Step::Read { block, delay } => {
                        if let Err(t) = c.read(block * BLOCK, BLOCK) {
                            reads.push((at + delay, block, t, contents(&volume, block)));
                        }
                    }
                }
            }
            for (_, b, t, old) in reads.drain(..) {
                c.read_done(b * BLOCK, Some(&old), t);
            }
            if clean {
                c.close().unwrap();
            }
            drop(c);
            let mut c = WarmCache::open(&o).unwrap();
            c.load_snapshot();
            loop {
                let next = c.next_preload_reads();
                if next.is_empty() {
                    break;
                }
                for (offset, length, t) in next {
                    let data: Vec<u8> = (offset / BLOCK..(offset + length) / BLOCK)
                        .flat_map(|b| contents(&volume, b))
                        .collect();
                    c.preload_done(offset, Some(&data), t);
                }
            }
            for b in 0..16u64 {
                if let Ok(got) = c.read(b * BLOCK, BLOCK) {
                    proptest::prop_assert_eq!(got[0], contents(&volume, b)[0], "block {}", b);
                }
            }
        }
    }

    #[test]
    fn an_unusable_log_falls_back_to_on_demand() {
        let dir = tempfile::tempdir().unwrap();
        let o = CacheOptions {
            log: Some(dir.path().join("missing-dir/warm.log")),
            ..options(dir.path(), false)
        };
        let c = WarmCache::open(&o).unwrap();
        assert!(matches!(c.source(), WarmupSource::Fallback(_)));
        assert_eq!(c.status_json()["warmup"]["done"], true);
    }
}
