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
//!
//! The read cache is described in [`read_cache`], the seek curve in [`seek`].

use std::collections::{BTreeMap, VecDeque};

use cordillera_types::Op;

use super::{ms_to_ns, Completion, Device, IoRequest};
use cordillera_types::Nanos;

mod read_cache;
mod seek;

pub use read_cache::ReadAhead;
use read_cache::{ReadCache, Segment};
pub use seek::SeekCurve;

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
    read_cache: ReadCache,
    /// Reads answered by the read cache (and reads that read ahead, answered before their
    /// service ends): (time, seq) → id.
    read_acks: BTreeMap<(Nanos, u64), u64>,
    outstanding: usize,
    next_seq: u64,
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
            read_cache: ReadCache::new(params.read_ahead),
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
            read_acks: BTreeMap::new(),
            outstanding: 0,
            next_seq: 0,
        }
    }

    /// When a read of `[offset, end)` answered by the read cache completes, submitted at
    /// `now` (queueing the asynchronous read-ahead the hit asks for); none on a miss.
    fn read_hit(&mut self, now: Nanos, offset: u64, end: u64) -> Option<Nanos> {
        let (t, prefetch) = self.read_cache.hit(now, offset, end, self.ns_per_byte)?;
        if let Some((at, bytes)) = prefetch {
            self.prefetch(now, at, bytes);
        }
        Some(t)
    }

    /// Queues an asynchronous read-ahead of `bytes` from `offset` (a segment's end), unless
    /// one is already queued there.
    fn prefetch(&mut self, now: Nanos, offset: u64, bytes: u64) {
        let bytes = bytes.min(self.params.capacity_bytes - offset);
        if bytes == 0 || !self.read_cache.queue_prefetch(offset) {
            return;
        }
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
                let positioning = self.positioning_ns(now, &pending);
                let service =
                    (positioning + (r.length_bytes as f64 * self.ns_per_byte).ceil() as u64).max(1);
                let Some(start) = self.read_cache.start_prefetch(r.offset_bytes) else {
                    continue; // its segment is gone (written over, replaced or read past)
                };
                self.read_cache.keep(
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
            if r.op == Op::Read && pending.reported && self.read_cache.is_on() {
                let end = r.offset_bytes + r.length_bytes;
                // Read ahead for its stream while it waited.
                if let Some(t) = self.read_hit(now, r.offset_bytes, end) {
                    self.read_acks.insert((t, pending.seq), r.id);
                    continue;
                }
                let continues = self.read_cache.continues(r.offset_bytes);
                if continues {
                    let ra = self.read_cache.read_ahead_bytes();
                    pending.read_ahead = ra.min(self.params.capacity_bytes - end);
                }
                let positioning = self.positioning_ns(now, &pending);
                let data_in =
                    now + positioning + (r.length_bytes as f64 * self.ns_per_byte).ceil() as u64;
                let service = (data_in - now
                    + (pending.read_ahead as f64 * self.ns_per_byte).ceil() as u64)
                    .max(1);
                self.read_cache.keep(
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
        } else {
            self.read_cache.written(request.offset_bytes, end);
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
mod tests;
