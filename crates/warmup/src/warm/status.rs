//! What the cache counts and reports: hit rates (with samples over the last hour) and the
//! pre-load's progress.

use std::collections::VecDeque;

use serde::Serialize;

use super::{WarmCache, BLOCK, NANOS_PER_S, SAMPLES, SAMPLE_S};

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

#[derive(Default)]
pub(super) struct Counters {
    pub read_requests: u64,
    pub read_hits: u64,
    pub read_blocks: u64,
    pub hit_blocks: u64,
    /// (read blocks, hit blocks) per SAMPLE_S seconds since start, the last hour.
    samples: VecDeque<(u64, u64)>,
    sample_base: (u64, u64),
    samples_taken: u64,
}

impl Counters {
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
}

pub(super) struct Preload {
    pub source: WarmupSource,
    /// Blocks to read from the volume, sorted; `next` is the first not yet issued.
    pub blocks: Vec<u64>,
    pub next: usize,
    pub outstanding: usize,
    /// Snapshot pages, loaded before the first request.
    pub snapshot: Vec<(u64, Vec<u8>)>,
    pub planned_blocks: u64,
    pub loaded_blocks: u64,
    pub skipped_blocks: u64,
    pub started_ns: u64,
    pub seconds: Option<f64>,
}

impl Preload {
    pub fn new(now: u64, source: WarmupSource) -> Preload {
        Preload {
            source,
            blocks: Vec::new(),
            next: 0,
            outstanding: 0,
            snapshot: Vec::new(),
            planned_blocks: 0,
            loaded_blocks: 0,
            skipped_blocks: 0,
            started_ns: now,
            seconds: None,
        }
    }

    /// No pre-load: on-demand warm-up, for `why`.
    pub fn fall_back(&mut self, now: u64, why: String) {
        *self = Preload::new(now, WarmupSource::Fallback(why));
        self.seconds = Some(0.0);
    }

    pub fn finish_if_done(&mut self, now: u64) {
        if self.seconds.is_none()
            && self.next >= self.blocks.len()
            && self.outstanding == 0
            && self.snapshot.is_empty()
        {
            let s = now.saturating_sub(self.started_ns) as f64 / NANOS_PER_S as f64;
            self.seconds = Some(s);
            tracing::info!(
                source = %self.source,
                planned_blocks = self.planned_blocks,
                loaded_blocks = self.loaded_blocks,
                loaded_bytes = self.loaded_blocks * BLOCK,
                seconds = s,
                "cache pre-load finished"
            );
            self.blocks = Vec::new();
        }
    }
}

/// The cache's state for `/status` (the JSON field names are the documented ones).
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub capacity_bytes: u64,
    pub cached_blocks: usize,
    pub read_requests: u64,
    pub read_hits: u64,
    pub read_blocks: u64,
    pub hit_blocks: u64,
    pub hit_rate: Option<f64>,
    pub hit_rate_samples_s: u64,
    pub hit_rates: Vec<Option<f64>>,
    pub log_failed: bool,
    pub log_error: Option<String>,
    pub staged_entries: usize,
    pub log_chunks_written: u64,
    pub log_bytes_written: u64,
    pub warmup: PreloadStatus,
}

#[derive(Clone, Debug, Serialize)]
pub struct PreloadStatus {
    pub source: String,
    pub algorithm: String,
    pub planned_blocks: u64,
    pub loaded_blocks: u64,
    pub loaded_bytes: u64,
    pub skipped_blocks_written_meanwhile: u64,
    pub done: bool,
    pub seconds: Option<f64>,
}

impl WarmCache {
    pub fn status(&self) -> Status {
        let rate = |hits: u64, all: u64| (all > 0).then(|| hits as f64 / all as f64);
        let c = &self.counters;
        let p = &self.preload;
        let log = self.log.as_ref();
        Status {
            capacity_bytes: self.cache.capacity_blocks() as u64 * BLOCK,
            cached_blocks: self.cache.valid_blocks(),
            read_requests: c.read_requests,
            read_hits: c.read_hits,
            read_blocks: c.read_blocks,
            hit_blocks: c.hit_blocks,
            hit_rate: rate(c.hit_blocks, c.read_blocks),
            hit_rate_samples_s: SAMPLE_S,
            hit_rates: c.samples.iter().map(|(r, h)| rate(*h, *r)).collect(),
            log_failed: log.is_some_and(|l| l.failed.is_some()),
            log_error: log.and_then(|l| l.failed.clone()),
            staged_entries: log
                .and_then(|l| l.monitor.as_ref())
                .map_or(0, |m| m.staged_entries()),
            log_chunks_written: log.map_or(0, |l| l.chunks),
            log_bytes_written: log.map_or(0, |l| l.bytes),
            warmup: PreloadStatus {
                source: p.source.to_string(),
                algorithm: self.options.algorithm.to_string(),
                planned_blocks: p.planned_blocks,
                loaded_blocks: p.loaded_blocks,
                loaded_bytes: p.loaded_blocks * BLOCK,
                skipped_blocks_written_meanwhile: p.skipped_blocks,
                done: p.seconds.is_some(),
                seconds: p.seconds,
            },
        }
    }
}
