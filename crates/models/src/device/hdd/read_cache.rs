//! The read cache ([`ReadAhead`]) keeps the data of recent reads in segments, one per stream
//! (least recently used replaced). A read that continues a segment (starts where it ends) and
//! misses is a stream: the mechanism goes on reading `bytes` beyond it into the segment, and
//! stays busy for that transfer (the host's read completes when its own bytes are in). A read
//! inside a segment is a hit: it completes after the fixed hit cost and the host transfer, or
//! when its last byte has come off the platter if the read-ahead is still filling the segment.
//! A write drops the segments it overlaps. Random reads never read ahead.
//!
//! With [`ReadAhead::asynchronous`] (a host file cache's read-ahead, as NTFS's cache manager
//! does it, rather than a drive's), a hit that leaves less than `bytes` of its segment ahead of
//! it, once the segment is all in, also queues a read of the next `bytes` into the segment: an
//! internal request, scheduled like any other, whose bytes the stream then finds cached instead
//! of waiting for a miss to position and read them.

use std::collections::VecDeque;

use cordillera_types::Nanos;

use super::super::ms_to_ns;

/// A drive's (or its host's file system's) read cache that reads ahead on sequential streams.
#[derive(Clone, Copy, Debug)]
pub struct ReadAhead {
    /// Bytes read beyond a read that continues a stream.
    pub bytes: u64,
    /// Segments (streams) held at once.
    pub segments: usize,
    /// Fixed cost of a hit.
    pub hit_ms: f64,
    /// Host transfer rate of a hit, MB/s (10^6 bytes).
    pub hit_mb_per_s: f64,
    /// Whether a stream's next `bytes` are read while it is served from the current ones
    /// (see the module's documentation); otherwise only a miss reads ahead.
    pub asynchronous: bool,
}

/// Bytes `[start, end)` of the read cache; byte `b ≥ fill_from` is in at
/// `fill_start_ns + (b − fill_from) × ns per byte`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment {
    pub start: u64,
    pub end: u64,
    pub fill_from: u64,
    pub fill_start_ns: Nanos,
}

/// The segments a disk holds, and the asynchronous read-aheads it has queued; the disk
/// schedules the reads, this decides hits and keeps the segments.
#[derive(Debug)]
pub(super) struct ReadCache {
    params: Option<ReadAhead>,
    /// Most recently used first.
    segments: VecDeque<Segment>,
    /// Offsets of asynchronous read-aheads queued and not yet started.
    prefetches: Vec<u64>,
}

impl ReadCache {
    pub fn new(params: Option<ReadAhead>) -> ReadCache {
        ReadCache {
            params,
            segments: VecDeque::new(),
            prefetches: Vec::new(),
        }
    }

    pub fn is_on(&self) -> bool {
        self.params.is_some()
    }

    /// Bytes read beyond a read that continues a stream (none without a read cache).
    pub fn read_ahead_bytes(&self) -> u64 {
        self.params.map_or(0, |ra| ra.bytes)
    }

    /// When a read of `[offset, end)` inside a segment completes, submitted at `now`, and the
    /// asynchronous read-ahead it asks for (offset, bytes); none on a miss. A hit makes its
    /// segment the most recently used.
    pub fn hit(
        &mut self,
        now: Nanos,
        offset: u64,
        end: u64,
        ns_per_byte: f64,
    ) -> Option<(Nanos, Option<(u64, u64)>)> {
        let ra = self.params?;
        let i = self
            .segments
            .iter()
            .position(|s| s.start <= offset && end <= s.end)?;
        let seg = self.segments.remove(i).expect("found");
        self.segments.push_front(seg);
        let host = ms_to_ns(ra.hit_ms) + (end - offset) as f64 * 1e3 / ra.hit_mb_per_s;
        // Bytes before `fill_from` are in (an asynchronous read-ahead extends a segment).
        let arrived_at = |b: u64| match b.checked_sub(seg.fill_from).filter(|&n| n > 0) {
            Some(n) => seg.fill_start_ns + (n as f64 * ns_per_byte).ceil() as u64,
            None => 0,
        };
        let arrived = arrived_at(end);
        let prefetch = (ra.asynchronous && seg.end - end < ra.bytes && arrived_at(seg.end) <= now)
            .then_some((seg.end, ra.bytes));
        Some(((now + host.ceil() as u64).max(arrived), prefetch))
    }

    /// Notes an asynchronous read-ahead queued at `offset`; false if one already is.
    pub fn queue_prefetch(&mut self, offset: u64) -> bool {
        if self.prefetches.contains(&offset) {
            return false;
        }
        self.prefetches.push(offset);
        true
    }

    /// The read-ahead queued at `offset` starts: the start of the segment it extends, if that
    /// segment is still held (not written over, replaced or read past).
    pub fn start_prefetch(&mut self, offset: u64) -> Option<u64> {
        self.prefetches.retain(|&o| o != offset);
        self.segments
            .iter()
            .find(|s| s.end == offset)
            .map(|s| s.start)
    }

    /// Whether a read at `offset` continues a held segment (a stream).
    pub fn continues(&self, offset: u64) -> bool {
        self.segments.iter().any(|s| s.end == offset)
    }

    /// Takes `segment` in (replacing the one it continues, if any).
    pub fn keep(&mut self, segment: Segment, continues: bool) {
        let Some(ra) = self.params else {
            return;
        };
        if continues {
            self.segments.retain(|s| s.end != segment.start);
        }
        self.segments
            .retain(|s| s.end <= segment.start || s.start >= segment.end);
        self.segments.push_front(segment);
        self.segments.truncate(ra.segments.max(1));
    }

    /// A write of `[start, end)`: the segments it overlaps are dropped.
    pub fn written(&mut self, start: u64, end: u64) {
        if !self.segments.is_empty() {
            self.segments.retain(|s| s.end <= start || s.start >= end);
        }
    }
}
