//! Start-up and cache replacement: reading the warm-up log back and planning the pre-load.
//!
//! The log is read through a [`LogReader`] — the log file in the volume server, bytes in memory
//! in the tests and the simulator. Reading happens only here (at start, before any request, and
//! when the cache is replaced); everything the core writes goes out as [`CacheIo`].

use super::status::{Preload, WarmupSource};
use super::{CacheIo, Log, Phase, WarmCache, BLOCK};
use crate::data_cache::DataCache;
use crate::wlog::{self, Chunk, Entry, Monitor, Superblock};

/// Reads the warm-up log.
pub trait LogReader {
    /// The log's length in bytes (a device's size; a file's length).
    fn length_bytes(&mut self) -> Result<u64, String>;
    /// A block device, used whole (a file is sized to [`Options::log_bytes`]).
    fn is_device(&self) -> bool {
        false
    }
    /// Up to `length` bytes at `offset` (fewer at the end).
    fn read(&mut self, offset: u64, length: usize) -> Result<Vec<u8>, String>;
    /// Where data resumes at or after `offset` (a sparse file's holes hold no chunk), or
    /// `offset`.
    fn next_data(&mut self, offset: u64) -> u64 {
        offset
    }
}

/// A log held in memory.
pub struct MemoryLog<'a>(pub &'a [u8]);

impl LogReader for MemoryLog<'_> {
    fn length_bytes(&mut self) -> Result<u64, String> {
        Ok(self.0.len() as u64)
    }

    fn is_device(&self) -> bool {
        true
    }

    fn read(&mut self, offset: u64, length: usize) -> Result<Vec<u8>, String> {
        let start = (offset as usize).min(self.0.len());
        let end = (start + length).min(self.0.len());
        Ok(self.0[start..end].to_vec())
    }
}

/// Carries out a log command on a log held in memory (tests and simulations): a write lands at
/// once, a sync or resize is answered at once. Anything else (the volume's reads and flush) is
/// handed back.
pub fn run_in_memory(
    core: &mut WarmCache,
    log: &mut Vec<u8>,
    now: u64,
    io: CacheIo,
) -> Option<CacheIo> {
    match io {
        CacheIo::LogWrite {
            id,
            offset_bytes,
            data,
        } => {
            let at = offset_bytes as usize;
            if log.len() < at + data.len() {
                log.resize(at + data.len(), 0);
            }
            log[at..at + data.len()].copy_from_slice(&data);
            core.handle_log_done(now, id, Ok(()));
        }
        CacheIo::LogResize { id, length_bytes } => {
            log.resize(length_bytes as usize, 0);
            core.handle_log_done(now, id, Ok(()));
        }
        CacheIo::LogSync { id } => core.handle_log_done(now, id, Ok(())),
        other => return Some(other),
    }
    None
}

/// The log's intact chunks.
fn scan(log: &mut dyn LogReader, sb: Superblock) -> Result<Vec<Chunk>, String> {
    // `scan` takes two closures over the one reader: the second is only a hint, so it goes
    // through a cell.
    let reader = std::cell::RefCell::new(log);
    wlog::scan(
        sb.capacity,
        sb.instance,
        |offset, length| reader.borrow_mut().read(offset, length),
        |offset| reader.borrow_mut().next_data(offset),
    )
}

/// Chunks ordered by where they lie in the log.
fn chunks_by_offset(chunks: &[Chunk]) -> Vec<&Chunk> {
    let mut v: Vec<&Chunk> = chunks.iter().collect();
    v.sort_by_key(|c| c.offset);
    v
}

impl WarmCache {
    pub(super) fn start_log(&mut self, now: u64, log: &mut dyn LogReader) -> Result<(), String> {
        let o = self.options.clone();
        let len = log.length_bytes()?;
        let existing = if len >= wlog::PAGE {
            let head = log.read(0, wlog::PAGE as usize)?;
            match Superblock::decode(&head) {
                Ok(sb) if sb.capacity <= len => Some(sb),
                Ok(sb) => {
                    tracing::warn!(
                        capacity = sb.capacity,
                        len,
                        "warm-up log shorter than its superblock says; starting a new log"
                    );
                    None
                }
                Err(wlog::LogError::NoSuperblock) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "starting a new warm-up log");
                    None
                }
            }
        } else {
            None
        };
        let (sb, after) = match existing {
            Some(sb) => {
                let chunks = scan(log, sb).map_err(|e| format!("reading the log: {e}"))?;
                let use_data = sb.clean && sb.data && sb.data_from != u64::MAX;
                let data_from = use_data.then_some(sb.data_from);
                self.plan_from_log(log, &chunks, data_from)?;
                self.preload.source = if use_data {
                    WarmupSource::LogWithData
                } else {
                    WarmupSource::Log
                };
                tracing::info!(
                    chunks = chunks.len(),
                    clean = sb.clean,
                    planned_blocks = self.preload.planned_blocks,
                    from_snapshot = self.preload.snapshot.len(),
                    algorithm = %o.algorithm,
                    "warm-up log read"
                );
                // Not clean from here on: a crash must not let the next start trust logged
                // data (unless that safeguard is removed, for the tests that show it matters).
                // After a crash, the entries staged then are missing from the log: the data of
                // the chunks written so far is never trusted again.
                // A new generation of sequence numbers, above every chunk the crashed life may
                // have written (found now or not: `data_from` holds the newest generation).
                let mut after = wlog::resume_point(&chunks);
                let (clean, data_from) = if !o.safeguards.clean_close_only {
                    (sb.clean, sb.data_from)
                } else if sb.clean && sb.data_from != u64::MAX {
                    (false, sb.data_from)
                } else {
                    let newest = after.map_or(0, |(seq, _)| seq);
                    // (A version 1 log has no `data_from`: its newest chunk's generation.)
                    let base = match sb.data_from {
                        u64::MAX => newest,
                        from => from.max(newest),
                    };
                    let generation = base >> wlog::GENERATION_SHIFT;
                    let first = (generation + 1) << wlog::GENERATION_SHIFT;
                    after = Some((first - 1, after.map_or(wlog::PAGE, |(_, end)| end)));
                    (false, first)
                };
                (
                    Superblock {
                        clean,
                        data: o.log_data,
                        data_from,
                        ..sb
                    },
                    after,
                )
            }
            None => {
                let device = log.is_device();
                let bytes = if device { len } else { o.log_bytes };
                let capacity = bytes / wlog::PAGE * wlog::PAGE;
                if capacity < 16 * wlog::PAGE {
                    return Err(
                        "the warm-up log must be at least 64 KiB (--warmup-log-size, or the device)"
                            .into(),
                    );
                }
                if !device {
                    let id = self.id();
                    self.out.push_back(CacheIo::LogResize {
                        id,
                        length_bytes: capacity,
                    });
                }
                self.preload.source = WarmupSource::NewLog;
                (
                    Superblock {
                        instance: o.new_instance,
                        capacity,
                        clean: false,
                        data: o.log_data,
                        data_from: 1,
                    },
                    None,
                )
            }
        };
        self.log_write(0, sb.encode());
        let id = self.log_sync();
        self.phase = Phase::Starting { id };
        self.log = Some(Log {
            superblock: sb,
            monitor: Some(Monitor::new(
                sb,
                o.metadata_buffer_bytes,
                o.data_buffer_bytes,
                after,
            )),
            failed: None,
            chunks: 0,
            bytes: 0,
        });
        self.preload.started_ns = now;
        Ok(())
    }

    /// The pre-load from the log's chunks: the snapshot's blocks (each chunk's data read once,
    /// in log order, and used only if its CRC holds) and the blocks to read from the volume.
    fn plan_from_log(
        &mut self,
        log: &mut dyn LogReader,
        chunks: &[Chunk],
        data_from: Option<u64>,
    ) -> Result<(), String> {
        let o = &self.options;
        let plan = wlog::plan_by(
            chunks,
            &[],
            (o.warmup_bytes / BLOCK) as usize,
            data_from,
            o.algorithm,
            o.seed,
        );
        let mut from_volume = plan.from_volume();
        let wanted = plan.from_snapshot();
        let mut k = 0;
        for c in &chunks_by_offset(chunks) {
            let end = c.data_offset + c.data_blocks * BLOCK;
            let first = k;
            while k < wanted.len() && wanted[k].1 < end {
                k += 1;
            }
            if first == k {
                continue;
            }
            let length = (c.data_blocks * BLOCK) as usize;
            let data = log
                .read(c.data_offset, length)
                .map_err(|e| format!("reading the log: {e}"))?;
            if c.data_intact(&data) {
                for &(b, at) in &wanted[first..k] {
                    let at = (at - c.data_offset) as usize;
                    self.preload
                        .snapshot
                        .push((b, data[at..at + BLOCK as usize].to_vec()));
                }
            } else {
                tracing::warn!(
                    chunk = c.seq,
                    "warm-up log chunk data damaged; its blocks are read from the volume"
                );
                from_volume.extend(wanted[first..k].iter().map(|(b, _)| *b));
            }
        }
        from_volume.sort_unstable();
        self.preload.blocks = from_volume;
        self.preload.planned_blocks = plan.blocks.len() as u64;
        Ok(())
    }

    pub(super) fn handle_reset_step(
        &mut self,
        now: u64,
        warmup_bytes: u64,
        log: Option<&mut dyn LogReader>,
    ) {
        self.cache = DataCache::new(self.cache.capacity_blocks());
        let limit = (warmup_bytes / BLOCK) as usize;
        let staged: Vec<Entry> = self
            .log
            .as_ref()
            .and_then(|l| l.monitor.as_ref())
            .map(|m| m.staged().copied().collect())
            .unwrap_or_default();
        let mut chunks = Vec::new();
        let why = match (self.log.as_ref(), log) {
            (Some(l), _) if l.failed.is_some() => Some("the log failed".to_string()),
            (Some(l), Some(reader)) => match scan(reader, l.superblock) {
                Ok(c) => {
                    chunks = c;
                    None
                }
                Err(e) => Some(format!("the log cannot be read: {e}")),
            },
            _ => Some("no log".to_string()),
        };
        let o = &self.options;
        let plan = wlog::plan_by(&chunks, &staged, limit, None, o.algorithm, o.seed);
        let source = match (&why, staged.is_empty() && chunks.is_empty()) {
            (None, _) => WarmupSource::Log,
            (Some(w), false) => WarmupSource::StagingOnly(w.clone()),
            (Some(w), true) => WarmupSource::Fallback(w.clone()),
        };
        // Reads still out keep their count; their blocks are not loaded twice (fill_if_absent).
        let outstanding = self.preload.outstanding;
        self.preload = Preload::new(now, source);
        self.preload.outstanding = outstanding;
        self.preload.blocks = plan.from_volume();
        self.preload.planned_blocks = plan.blocks.len() as u64;
        tracing::info!(
            source = %self.preload.source,
            planned_blocks = self.preload.planned_blocks,
            "cache replaced; pre-loading"
        );
        self.preload.finish_if_done(now);
    }
}
