//! A mechanical disk: seek curve, rotation, media transfer, controller overhead, a request
//! scheduler, an optional write-back cache and an optional read cache that reads ahead.
//!
//! Geometry: the disk has `heads` surfaces; a track holds what passes under a head in one
//! rotation at the media rate (`track_bytes = rate × rotation period`); byte offsets fill tracks,
//! then cylinders, in order. A request's angular position is its offset within its track; the
//! platters turn continuously from angle 0 at time 0.
//!
//! Service time of a request = controller overhead + seek (by cylinder distance) + rotational
//! latency (wait for the target angle) + transfer (size / media rate). A request that starts
//! exactly where the previous one ended is a *streaming continuation*: the head is already there,
//! so only the transfer is paid (the track buffer hides the command overhead).
//!
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
//!
//! Seek time for distance `d ≥ 1` cylinders is `a + b·√d + c·d`, fitted so that the one-cylinder
//! seek equals the track-to-track figure, the full-stroke seek equals the full-stroke figure, and
//! the mean over uniformly random start and end cylinders equals the average figure (which is how
//! drive specifications define it).

use std::collections::{BTreeMap, VecDeque};

use cordillera_types::Op;

use super::{ms_to_ns, Completion, Device, IoRequest};
use cordillera_types::Nanos;

/// Which queued request the disk serves next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// First come, first served.
    Fcfs,
    /// Elevator sweeping upward, jumping back to the lowest cylinder (C-LOOK).
    CLook,
    /// Shortest positioning (seek + rotation) time first among the oldest `window` requests;
    /// a request waiting [`SPTF_MAX_WAIT_NS`] goes first.
    Sptf { window: usize },
}

/// The parameters of a disk model; every preset is one of these.
#[derive(Clone, Debug)]
pub struct HddParams {
    pub capacity_bytes: u64,
    pub rpm: f64,
    pub heads: u32,
    pub seek_track_to_track_ms: f64,
    pub seek_average_ms: f64,
    pub seek_full_stroke_ms: f64,
    /// Sustained media rate, MB/s (10^6 bytes).
    pub transfer_mb_per_s: f64,
    /// Controller overhead per (non-streaming) request.
    pub overhead_ms: f64,
    pub scheduler: Scheduler,
    /// Write-back cache size; `None` for write-through.
    pub write_cache_bytes: Option<u64>,
    /// Time to accept a write into the write-back cache.
    pub cache_write_ms: f64,
    /// Read cache with read-ahead on sequential streams; `None` for none.
    pub read_ahead: Option<ReadAhead>,
}

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
struct Segment {
    start: u64,
    end: u64,
    fill_from: u64,
    fill_start_ns: Nanos,
}

impl HddParams {
    pub fn rotation_ns(&self) -> f64 {
        60e9 / self.rpm
    }

    pub fn track_bytes(&self) -> u64 {
        ((self.transfer_mb_per_s * 1e6) * self.rotation_ns() / 1e9) as u64
    }

    pub fn cylinders(&self) -> u64 {
        (self.capacity_bytes / (self.track_bytes() * self.heads as u64)).max(2)
    }
}

/// Seek time in ns as a function of cylinder distance.
#[derive(Clone, Copy, Debug)]
pub struct SeekCurve {
    a: f64,
    b: f64,
    c: f64,
}

impl SeekCurve {
    /// Fits `a + b·√d + c·d` to (track-to-track, average, full-stroke) over `cylinders`.
    pub fn fit(t2t_ms: f64, avg_ms: f64, full_ms: f64, cylinders: u64) -> SeekCurve {
        assert!(cylinders >= 2 && t2t_ms > 0.0 && t2t_ms <= avg_ms && avg_ms <= full_ms);
        let n = cylinders as f64;
        let full_d = n - 1.0;
        // Mean of √d and d over uniformly random pairs of cylinders (continuous approximation).
        let mean_sqrt = 8.0 / 15.0 * n.sqrt();
        let mean_d = n / 3.0;
        // Rows: [1, √d, d] · [a, b, c] = t.
        let m = [
            [1.0, 1.0, 1.0],
            [1.0, mean_sqrt, mean_d],
            [1.0, full_d.sqrt(), full_d],
        ];
        let t = [ms_to_ns(t2t_ms), ms_to_ns(avg_ms), ms_to_ns(full_ms)];
        let det = |m: &[[f64; 3]; 3]| {
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
                - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        };
        let d = det(&m);
        let column = |k: usize| {
            let mut mk = m;
            for (row, value) in mk.iter_mut().zip(t) {
                row[k] = value;
            }
            det(&mk) / d
        };
        SeekCurve {
            a: column(0),
            b: column(1),
            c: column(2),
        }
    }

    pub fn seek_ns(&self, distance: u64) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let d = distance as f64;
        (self.a + self.b * d.sqrt() + self.c * d).max(0.0)
    }
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    request: IoRequest,
    /// Where the request starts, precomputed for the scheduler's scans.
    cylinder: u64,
    angle_ns: u64,
    /// Whether the request's completion is reported (destages of the cache and asynchronous
    /// read-ahead are internal).
    reported: bool,
    /// An asynchronous read-ahead into the segment ending at its offset.
    prefetch: bool,
    /// Bytes read ahead after it (set when its service starts); its completion is then
    /// reported when its own bytes are in, before the service ends.
    read_ahead: u64,
    seq: u64,
    arrived: Nanos,
}

/// A host request waiting this long is served next whatever its position: drives age their
/// command queues so that shortest-positioning-first cannot starve a request far from the head.
pub const SPTF_MAX_WAIT_NS: Nanos = 4_000_000_000;

/// The disk model.
pub struct Hdd {
    params: HddParams,
    seek: SeekCurve,
    /// One rotation, rounded to the ns.
    rotation_ns: u64,
    overhead_ns: u64,
    track_bytes: u64,
    cylinder_bytes: u64,
    ns_per_byte: f64,
    fifo: VecDeque<Pending>,
    /// C-LOOK queue by (cylinder, arrival).
    by_cylinder: BTreeMap<(u64, u64), Pending>,
    in_service: Option<(Nanos, Pending)>,
    head_cylinder: u64,
    /// Byte after the last transfer: a request starting here streams.
    head_end_bytes: u64,
    /// Instant the mechanism becomes free (completion of the request in service).
    busy_ns: u64,
    cache_used_bytes: u64,
    /// Writes accepted by the cache, completing at their time (in order).
    cache_acks: VecDeque<(Nanos, u64)>,
    /// The read cache, most recently used first.
    segments: VecDeque<Segment>,
    /// Reads answered by the read cache (and reads that read ahead, answered before their
    /// service ends): (time, seq) → id.
    read_acks: BTreeMap<(Nanos, u64), u64>,
    outstanding: usize,
    next_seq: u64,
    /// Offsets of asynchronous read-aheads queued and not yet started.
    prefetches: Vec<u64>,
}

impl Hdd {
    pub fn new(params: HddParams) -> Hdd {
        assert!(
            params.track_bytes() < 1 << 24 && params.rotation_ns() < 1e9,
            "geometry out of the modeled range"
        );
        let seek = SeekCurve::fit(
            params.seek_track_to_track_ms,
            params.seek_average_ms,
            params.seek_full_stroke_ms,
            params.cylinders(),
        );
        Hdd {
            seek,
            rotation_ns: params.rotation_ns().round() as u64,
            overhead_ns: ms_to_ns(params.overhead_ms).round() as u64,
            track_bytes: params.track_bytes(),
            cylinder_bytes: params.track_bytes() * params.heads as u64,
            ns_per_byte: 1e3 / params.transfer_mb_per_s,
            params,
            fifo: VecDeque::new(),
            by_cylinder: BTreeMap::new(),
            in_service: None,
            head_cylinder: 0,
            head_end_bytes: u64::MAX,
            busy_ns: 0,
            cache_used_bytes: 0,
            cache_acks: VecDeque::new(),
            segments: VecDeque::new(),
            read_acks: BTreeMap::new(),
            outstanding: 0,
            next_seq: 0,
            prefetches: Vec::new(),
        }
    }

    /// When a read of `[offset, end)` inside a segment completes, submitted at `now`; none
    /// on a miss. A hit makes its segment the most recently used.
    fn read_hit(&mut self, now: Nanos, offset: u64, end: u64) -> Option<Nanos> {
        let ra = self.params.read_ahead?;
        let i = self
            .segments
            .iter()
            .position(|s| s.start <= offset && end <= s.end)?;
        let seg = self.segments.remove(i).expect("found");
        self.segments.push_front(seg);
        let host = ms_to_ns(ra.hit_ms) + (end - offset) as f64 * 1e3 / ra.hit_mb_per_s;
        // Bytes before `fill_from` are in (an asynchronous read-ahead extends a segment).
        let arrived_at = |b: u64| match b.checked_sub(seg.fill_from).filter(|&n| n > 0) {
            Some(n) => seg.fill_start_ns + (n as f64 * self.ns_per_byte).ceil() as u64,
            None => 0,
        };
        let arrived = arrived_at(end);
        if ra.asynchronous && seg.end - end < ra.bytes && arrived_at(seg.end) <= now {
            self.prefetch(now, seg.end, ra.bytes);
        }
        Some((now + host.ceil() as u64).max(arrived))
    }

    /// Queues an asynchronous read-ahead of `bytes` from `offset` (a segment's end), unless
    /// one is already queued there.
    fn prefetch(&mut self, now: Nanos, offset: u64, bytes: u64) {
        let bytes = bytes.min(self.params.capacity_bytes - offset);
        if bytes == 0 || self.prefetches.contains(&offset) {
            return;
        }
        self.prefetches.push(offset);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.enqueue(Pending {
            cylinder: self.cylinder_of(offset),
            angle_ns: self.angle_of(offset),
            request: IoRequest {
                id: u64::MAX,
                op: Op::Read,
                offset_bytes: offset,
                length_bytes: bytes,
            },
            reported: false,
            prefetch: true,
            read_ahead: 0,
            seq,
            arrived: now,
        });
    }

    /// Takes `segment` into the read cache (replacing the one it continues, if any).
    fn keep_segment(&mut self, segment: Segment, continues: bool) {
        let Some(ra) = self.params.read_ahead else {
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

    pub fn params(&self) -> &HddParams {
        &self.params
    }

    pub fn seek_curve(&self) -> SeekCurve {
        self.seek
    }

    fn cylinder_of(&self, offset_bytes: u64) -> u64 {
        offset_bytes / self.cylinder_bytes
    }

    /// Time from `start` until the head is over the first byte of `request` and may transfer.
    /// Rotation is integer arithmetic on ns (floating-point remainder is slow).
    fn positioning_ns(&self, start: Nanos, target: &Pending) -> u64 {
        self.positioning_ns_below(start, target, u64::MAX)
    }

    /// [`Self::positioning_ns`], or any value ≥ `bound` when it is at least `bound`: the
    /// rotational wait is only computed for candidates whose overhead and seek beat the best.
    fn positioning_ns_below(&self, start: Nanos, target: &Pending, bound: u64) -> u64 {
        if target.request.offset_bytes == self.head_end_bytes {
            return 0;
        }
        let moved = self.overhead_ns
            + self
                .seek
                .seek_ns(target.cylinder.abs_diff(self.head_cylinder)) as u64;
        if moved >= bound {
            return moved;
        }
        let angle_now = (start + moved) % self.rotation_ns;
        let wait = target.angle_ns + self.rotation_ns - angle_now;
        moved
            + if wait >= self.rotation_ns {
                wait - self.rotation_ns
            } else {
                wait
            }
    }

    /// The angular position (ns into a rotation) at which `offset_bytes` passes under the head.
    fn angle_of(&self, offset_bytes: u64) -> u64 {
        // A track is under 16 MiB and a rotation under 10^9 ns: the product fits in u64.
        (offset_bytes % self.track_bytes) * self.rotation_ns / self.track_bytes
    }

    fn service_ns(&self, start: Nanos, pending: &Pending) -> u64 {
        let transfer = (pending.request.length_bytes as f64 * self.ns_per_byte).ceil() as u64;
        (self.positioning_ns(start, pending) + transfer).max(1)
    }

    fn enqueue(&mut self, pending: Pending) {
        match self.params.scheduler {
            Scheduler::CLook => {
                self.by_cylinder
                    .insert((pending.cylinder, pending.seq), pending);
            }
            _ => self.fifo.push_back(pending),
        }
    }

    fn next_pending(&mut self, now: Nanos) -> Option<Pending> {
        match self.params.scheduler {
            Scheduler::Fcfs => self.fifo.pop_front(),
            Scheduler::CLook => {
                let key = self
                    .by_cylinder
                    .range((self.head_cylinder, 0)..)
                    .next()
                    .or_else(|| self.by_cylinder.iter().next())
                    .map(|(k, _)| *k)?;
                self.by_cylinder.remove(&key)
            }
            Scheduler::Sptf { window } => {
                // The host's queue is `window` deep (NCQ); the drive's own cache destages are
                // all candidates, wherever they sit in the queue.
                if let Some(i) = self.fifo.iter().position(|p| p.reported) {
                    if now.saturating_sub(self.fifo[i].arrived) >= SPTF_MAX_WAIT_NS {
                        return self.fifo.remove(i);
                    }
                }
                let mut host_seen = 0;
                let mut best: Option<(usize, u64)> = None;
                for (i, pending) in self.fifo.iter().enumerate() {
                    if pending.reported {
                        if host_seen == window.max(1) {
                            continue;
                        }
                        host_seen += 1;
                    }
                    let t =
                        self.positioning_ns_below(now, pending, best.map_or(u64::MAX, |(_, b)| b));
                    if best.is_none_or(|(_, b)| t < b) {
                        best = Some((i, t));
                    }
                }
                self.fifo.remove(best?.0)
            }
        }
    }

    fn start_next(&mut self, now: Nanos) {
        debug_assert!(self.in_service.is_none());
        while let Some(mut pending) = self.next_pending(now) {
            let r = pending.request;
            if pending.prefetch {
                self.prefetches.retain(|&o| o != r.offset_bytes);
                let positioning = self.positioning_ns(now, &pending);
                let service =
                    (positioning + (r.length_bytes as f64 * self.ns_per_byte).ceil() as u64).max(1);
                let Some(start) = self
                    .segments
                    .iter()
                    .find(|s| s.end == r.offset_bytes)
                    .map(|s| s.start)
                else {
                    continue; // its segment is gone (written over, replaced or read past)
                };
                self.keep_segment(
                    Segment {
                        start,
                        end: r.offset_bytes + r.length_bytes,
                        fill_from: r.offset_bytes,
                        fill_start_ns: now + positioning,
                    },
                    true,
                );
                self.busy_ns += service;
                self.in_service = Some((now + service, pending));
                return;
            }
            if r.op == Op::Read && pending.reported && self.params.read_ahead.is_some() {
                let end = r.offset_bytes + r.length_bytes;
                // Read ahead for its stream while it waited.
                if let Some(t) = self.read_hit(now, r.offset_bytes, end) {
                    self.read_acks.insert((t, pending.seq), r.id);
                    continue;
                }
                let continues = self.segments.iter().any(|s| s.end == r.offset_bytes);
                if continues {
                    let ra = self.params.read_ahead.expect("some").bytes;
                    pending.read_ahead = ra.min(self.params.capacity_bytes - end);
                }
                let positioning = self.positioning_ns(now, &pending);
                let data_in =
                    now + positioning + (r.length_bytes as f64 * self.ns_per_byte).ceil() as u64;
                let service = (data_in - now
                    + (pending.read_ahead as f64 * self.ns_per_byte).ceil() as u64)
                    .max(1);
                self.keep_segment(
                    Segment {
                        start: r.offset_bytes,
                        end: end + pending.read_ahead,
                        fill_from: r.offset_bytes,
                        fill_start_ns: now + positioning,
                    },
                    continues,
                );
                if pending.read_ahead > 0 {
                    self.read_acks
                        .insert((data_in.max(now + 1), pending.seq), r.id);
                }
                self.busy_ns += service;
                self.in_service = Some((now + service, pending));
                return;
            }
            let service = self.service_ns(now, &pending);
            self.busy_ns += service;
            self.in_service = Some((now + service, pending));
            return;
        }
    }

    fn queue_is_empty(&self) -> bool {
        self.fifo.is_empty() && self.by_cylinder.is_empty()
    }
}

impl Device for Hdd {
    fn capacity_bytes(&self) -> u64 {
        self.params.capacity_bytes
    }

    fn submit(&mut self, now: Nanos, request: IoRequest) {
        debug_assert!(request.offset_bytes + request.length_bytes <= self.params.capacity_bytes);
        self.outstanding += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        let end = request.offset_bytes + request.length_bytes;
        if request.op == Op::Read {
            if let Some(t) = self.read_hit(now, request.offset_bytes, end) {
                self.read_acks.insert((t, seq), request.id);
                // An asynchronous read-ahead it queued starts at once on an idle disk.
                if self.in_service.is_none() && !self.queue_is_empty() {
                    self.start_next(now);
                }
                return;
            }
        } else if !self.segments.is_empty() {
            self.segments
                .retain(|s| s.end <= request.offset_bytes || s.start >= end);
        }
        let cached = request.op == Op::Write
            && self
                .params
                .write_cache_bytes
                .is_some_and(|cap| self.cache_used_bytes + request.length_bytes <= cap);
        if cached {
            self.cache_used_bytes += request.length_bytes;
            let ack = now + ms_to_ns(self.params.cache_write_ms).ceil() as u64;
            self.cache_acks.push_back((ack, request.id));
        }
        self.enqueue(Pending {
            cylinder: self.cylinder_of(request.offset_bytes),
            angle_ns: self.angle_of(request.offset_bytes),
            request,
            reported: !cached,
            prefetch: false,
            read_ahead: 0,
            seq,
            arrived: now,
        });
        if self.in_service.is_none() {
            self.start_next(now);
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let service = self.in_service.map(|(t, _)| t);
        let ack = self.cache_acks.front().map(|(t, _)| *t);
        let read = self.read_acks.keys().next().map(|(t, _)| *t);
        [service, ack, read].into_iter().flatten().min()
    }

    fn advance(&mut self, now: Nanos, completions: &mut Vec<Completion>) {
        loop {
            // Reads answered by the cache, in time order, before anything at or after them.
            let next_other = [
                self.in_service.map(|(t, _)| t),
                self.cache_acks.front().map(|(t, _)| *t),
            ]
            .into_iter()
            .flatten()
            .min();
            if let Some((&(t, seq), &id)) = self.read_acks.iter().next() {
                if t <= now && next_other.is_none_or(|o| t < o) {
                    self.read_acks.remove(&(t, seq));
                    self.outstanding -= 1;
                    completions.push(Completion { id, time_ns: t });
                    continue;
                }
            }
            let service = self.in_service.map(|(t, _)| t).filter(|t| *t <= now);
            let ack = self
                .cache_acks
                .front()
                .map(|(t, _)| *t)
                .filter(|t| *t <= now);
            match (service, ack) {
                (Some(s), a) if a.is_none_or(|a| s < a) => {
                    let (_, done) = self.in_service.take().expect("in service");
                    let r = done.request;
                    let head_end = r.offset_bytes + r.length_bytes + done.read_ahead;
                    self.head_cylinder = self.cylinder_of(head_end.saturating_sub(1));
                    self.head_end_bytes = head_end;
                    if done.read_ahead > 0 || done.prefetch {
                        // Answered when its bytes were in (`read_acks`), or internal.
                    } else if done.reported {
                        self.outstanding -= 1;
                        completions.push(Completion {
                            id: r.id,
                            time_ns: s,
                        });
                    } else {
                        self.cache_used_bytes -= r.length_bytes;
                    }
                    if !self.queue_is_empty() {
                        self.start_next(s);
                    }
                }
                (_, Some(a)) => {
                    let (_, id) = self.cache_acks.pop_front().expect("ack");
                    self.outstanding -= 1;
                    completions.push(Completion { id, time_ns: a });
                }
                _ => break,
            }
        }
    }

    fn outstanding(&self) -> usize {
        self.outstanding
    }

    fn busy_ns(&self) -> u64 {
        self.busy_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    /// `streams` readers, each with one read outstanding, each reading `count` 64 KiB blocks
    /// in order from its own region 10 GB apart; MB/s.
    fn streams(params: HddParams, streams: u64, count: u64) -> f64 {
        let mut disk = Hdd::new(params);
        let block = 64 * 1024;
        let mut next: Vec<u64> = (0..streams).map(|s| s * 10_000_000_000).collect();
        let mut left = vec![count; streams as usize];
        for s in 0..streams {
            disk.submit(
                0,
                IoRequest {
                    id: s,
                    op: Op::Read,
                    offset_bytes: next[s as usize],
                    length_bytes: block,
                },
            );
            next[s as usize] += block;
            left[s as usize] -= 1;
        }
        let mut done = Vec::new();
        let mut end = 0;
        while let Some(t) = disk.poll_timeout() {
            disk.advance(t, &mut done);
            for c in done.drain(..) {
                end = c.time_ns;
                let s = c.id as usize;
                if left[s] > 0 {
                    left[s] -= 1;
                    disk.submit(
                        c.time_ns,
                        IoRequest {
                            id: c.id,
                            op: Op::Read,
                            offset_bytes: next[s],
                            length_bytes: block,
                        },
                    );
                    next[s] += block;
                }
            }
        }
        assert_eq!(disk.outstanding(), 0);
        (streams * count * block) as f64 / end as f64 * 1e3
    }

    /// As [`streams`], each reader sending its next read `think_ns` after the last one's
    /// answer (a request's trip over a network); MB/s.
    fn streams_thinking(params: HddParams, streams: u64, count: u64, think_ns: Nanos) -> f64 {
        let mut disk = Hdd::new(params);
        let block = 64 * 1024;
        let mut next: Vec<u64> = (0..streams).map(|s| s * 10_000_000_000).collect();
        let mut left = vec![count; streams as usize];
        let mut due: BTreeMap<(Nanos, u64), ()> = (0..streams).map(|s| ((0, s), ())).collect();
        let (mut done, mut end) = (Vec::new(), 0);
        loop {
            let submit = due.keys().next().copied();
            match (disk.poll_timeout(), submit) {
                (Some(t), s) if s.is_none_or(|(at, _)| t < at) => {
                    disk.advance(t, &mut done);
                    for c in done.drain(..) {
                        end = end.max(c.time_ns);
                        if left[c.id as usize] > 0 {
                            due.insert((c.time_ns + think_ns, c.id), ());
                        }
                    }
                }
                (_, Some((at, s))) => {
                    due.remove(&(at, s));
                    left[s as usize] -= 1;
                    let offset_bytes = next[s as usize];
                    next[s as usize] += block;
                    let request = IoRequest {
                        id: s,
                        op: Op::Read,
                        offset_bytes,
                        length_bytes: block,
                    };
                    disk.submit(at, request);
                }
                _ => break,
            }
        }
        assert_eq!(disk.outstanding(), 0);
        (streams * count * block) as f64 / end as f64 * 1e3
    }

    fn asynchronous() -> HddParams {
        let mut params = presets::hdd_params("sierra-1tb").unwrap();
        params.read_ahead.as_mut().unwrap().asynchronous = true;
        params
    }

    #[test]
    fn asynchronous_read_ahead_reads_the_next_window_while_the_stream_is_served() {
        let sync = presets::hdd_params("sierra-1tb").unwrap();
        let think = 1_000_000;
        let one = (
            streams_thinking(sync.clone(), 1, 2000, think),
            streams_thinking(asynchronous(), 1, 2000, think),
        );
        let nine = (
            streams_thinking(sync, 9, 300, think),
            streams_thinking(asynchronous(), 9, 300, think),
        );
        println!("MB/s synchronous and asynchronous, 1 ms between reads: one stream {one:?}, nine {nine:?}");
        assert!(one.1 > one.0 && nine.1 > nine.0, "{one:?} {nine:?}");
    }

    fn without_read_ahead() -> HddParams {
        HddParams {
            read_ahead: None,
            ..presets::hdd_params("sierra-1tb").unwrap()
        }
    }

    #[test]
    fn read_ahead_serves_interleaved_streams_and_keeps_one_stream_at_the_media_rate() {
        let with = presets::hdd_params("sierra-1tb").unwrap();
        assert!(with.read_ahead.is_some());
        let one = (
            streams(without_read_ahead(), 1, 2000),
            streams(with.clone(), 1, 2000),
        );
        assert!(
            one.1 >= 0.97 * one.0 && one.1 <= 1.03 * one.0,
            "one stream: {one:?} MB/s without and with read-ahead"
        );
        let nine = (streams(without_read_ahead(), 9, 300), streams(with, 9, 300));
        println!("MB/s without and with read-ahead: one stream {one:?}, nine streams {nine:?}");
        assert!(
            nine.1 > 2.0 * nine.0,
            "nine interleaved streams: {nine:?} MB/s without and with read-ahead"
        );
    }

    #[test]
    fn random_reads_do_not_read_ahead() {
        let run = |params: HddParams| {
            let mut device = Hdd::new(params);
            let spec = crate::bench::DiskBench {
                pattern: crate::bench::Pattern::Random,
                op: Op::Read,
                block_bytes: 64 * 1024,
                queue_depth: 64,
                count: 5_000,
                span_bytes: None,
                seed: 3,
            };
            crate::bench::run(&mut device, &spec).unwrap().iops
        };
        let (without, with) = (
            run(without_read_ahead()),
            run(presets::hdd_params("sierra-1tb").unwrap()),
        );
        println!("random 64 KiB reads, 64 outstanding: {without:.1} IOPS without read-ahead, {with:.1} with");
        // Not identical: a block drawn twice is a hit, which changes the scheduler's later
        // choices (5,000 draws over 1 TB: one hit with this seed).
        assert!(
            (with - without).abs() <= 0.02 * without,
            "{without} against {with} IOPS"
        );
    }

    #[test]
    fn a_write_drops_the_cached_data_it_overlaps() {
        let mut disk = Hdd::new(presets::hdd_params("sierra-1tb").unwrap());
        let read = |id, offset| IoRequest {
            id,
            op: Op::Read,
            offset_bytes: offset,
            length_bytes: 4096,
        };
        let mut done = Vec::new();
        let mut finish = |disk: &mut Hdd| {
            let mut last = 0;
            while let Some(t) = disk.poll_timeout() {
                disk.advance(t, &mut done);
                last = done.last().map_or(last, |c: &Completion| c.time_ns);
            }
            last
        };
        disk.submit(0, read(1, 1 << 30));
        let t = finish(&mut disk);
        // Cached: a hit, well under a millisecond.
        disk.submit(t, read(2, 1 << 30));
        let hit = finish(&mut disk) - t;
        assert!(hit < 200_000, "hit {hit} ns");
        disk.submit(
            t + hit,
            IoRequest {
                id: 3,
                op: Op::Write,
                offset_bytes: (1 << 30) + 1024,
                length_bytes: 512,
            },
        );
        let t = finish(&mut disk);
        disk.submit(t, read(4, 1 << 30));
        let miss = finish(&mut disk) - t;
        assert!(miss > 1_000_000, "after the write: {miss} ns");
    }

    #[test]
    fn seek_curve_meets_its_three_points_and_rises() {
        let n = 10_000;
        let curve = SeekCurve::fit(0.6, 4.7, 11.0, n);
        assert!((curve.seek_ns(1) - 0.6e6).abs() < 1.0);
        assert!((curve.seek_ns(n - 1) - 11.0e6).abs() < 1.0);
        // Mean over random pairs, by exhaustive distance distribution.
        let mut mean = 0.0;
        for d in 1..n {
            let p = 2.0 * (n - d) as f64 / (n as f64 * n as f64);
            mean += p * curve.seek_ns(d);
        }
        assert!(
            (mean / 1e6 - 4.7).abs() < 0.05,
            "mean seek {} ms",
            mean / 1e6
        );
        let mut last = 0.0;
        for d in 1..n {
            let t = curve.seek_ns(d);
            assert!(t >= last, "seek time falls at distance {d}");
            last = t;
        }
    }
}
