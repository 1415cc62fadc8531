//! A mechanical disk: seek curve, rotation, media transfer, controller overhead, a request
//! scheduler and an optional write-back cache.
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
//! Seek time for distance `d ≥ 1` cylinders is `a + b·√d + c·d`, fitted so that the one-cylinder
//! seek equals the track-to-track figure, the full-stroke seek equals the full-stroke figure, and
//! the mean over uniformly random start and end cylinders equals the average figure (which is how
//! drive specifications define it).

use std::collections::{BTreeMap, VecDeque};

use cordillera_types::Op;

use super::{ms_to_ns, Completion, Device, IoRequest};
use crate::kernel::Nanos;

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
    /// Whether the request's completion is reported (destages of the cache are internal).
    reported: bool,
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
            outstanding: 0,
            next_seq: 0,
        }
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
        if let Some(pending) = self.next_pending(now) {
            let service = self.service_ns(now, &pending);
            self.busy_ns += service;
            self.in_service = Some((now + service, pending));
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
        match (service, ack) {
            (Some(s), Some(a)) => Some(s.min(a)),
            (s, a) => s.or(a),
        }
    }

    fn advance(&mut self, now: Nanos, completions: &mut Vec<Completion>) {
        loop {
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
                    self.head_cylinder =
                        self.cylinder_of((r.offset_bytes + r.length_bytes).saturating_sub(1));
                    self.head_end_bytes = r.offset_bytes + r.length_bytes;
                    if done.reported {
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
