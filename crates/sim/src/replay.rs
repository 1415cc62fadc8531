//! Open-loop replay of a trace on a device (`cordillera sim replay`): each record is submitted at
//! its trace time, whatever the device's state, and its response time measured.
//!
//! Mapping: offsets beyond the device wrap (`offset mod (capacity − size)`, 512-aligned) and are
//! counted; zero-length records are skipped; a record earlier than the previous one (traces stored
//! by completion) is submitted at the previous one's time and counted as late.

use std::collections::VecDeque;

use cordillera_trace::Record;
use cordillera_types::Op;
use serde::Serialize;

use crate::kernel::{EventHash, Nanos};
use cordillera_models::device::{Completion, Device, IoRequest};
use cordillera_models::histogram::{Histogram, LatencySummary};

#[derive(Clone, Debug, Serialize)]
pub struct Interval {
    pub start_s: f64,
    pub completions: u64,
    /// Time-weighted mean of outstanding requests.
    pub mean_queue: f64,
    pub max_queue: u64,
    /// Busy time charged in the interval (at the start of each service) over its length.
    pub utilization: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    pub records: u64,
    pub skipped_empty: u64,
    pub wrapped: u64,
    pub late: u64,
    /// Simulated time from the first arrival to the last completion.
    pub duration_s: f64,
    pub reads: LatencySummary,
    pub writes: LatencySummary,
    pub utilization: f64,
    pub mean_queue: f64,
    pub max_queue: u64,
    pub interval_s: f64,
    pub intervals: Vec<Interval>,
    /// The trace's own recorded response times, when it has them.
    pub recorded_reads: Option<LatencySummary>,
    pub recorded_writes: Option<LatencySummary>,
    /// Hash of every arrival and completion: equal for equal runs.
    pub run_hash: u64,
}

/// Replays `records` (in trace order) on `device`, reporting per `interval_ns` of simulated time.
pub fn replay(
    records: impl Iterator<Item = Record>,
    device: &mut dyn Device,
    interval_ns: u64,
) -> ReplayReport {
    assert!(interval_ns > 0);
    let capacity = device.capacity_bytes();
    let mut r = Run::new(interval_ns);
    let mut origin: Option<i64> = None;
    let mut last_arrival: Nanos = 0;
    let mut pending = records.peekable();
    let mut completions: Vec<Completion> = Vec::new();
    // Submit time and direction of requests from id `first_id` on; `None` once completed. The
    // front is trimmed as requests complete, so memory follows the requests in flight, not the
    // length of the trace.
    let mut submitted: VecDeque<Option<(Nanos, Op)>> = VecDeque::new();
    let mut first_id: u64 = 0;
    let mut next_id: u64 = 0;
    let mut hash = EventHash::default();
    loop {
        // The next arrival, mapped onto the device.
        let arrival = loop {
            let Some(record) = pending.peek().copied() else {
                break None;
            };
            if record.length_bytes == 0 || record.length_bytes > capacity {
                r.skipped_empty += 1;
                pending.next();
                continue;
            }
            let origin = *origin.get_or_insert(record.time_ns);
            let mut at = record.time_ns.saturating_sub(origin).max(0) as Nanos;
            if at < last_arrival {
                at = last_arrival;
                r.late += 1;
            }
            break Some((at, record));
        };
        let timeout = device.poll_timeout();
        let due = match (timeout, &arrival) {
            (Some(t), Some((at, _))) => (t <= *at).then_some(t),
            (t, None) => t,
            (None, Some(_)) => None,
        };
        match (due, arrival) {
            (Some(t), _) => {
                r.advance_to(t, device);
                device.advance(t, &mut completions);
                for c in completions.drain(..) {
                    let (at, op) = submitted[(c.id - first_id) as usize]
                        .take()
                        .expect("one completion per request");
                    while submitted.front().is_some_and(Option::is_none) {
                        submitted.pop_front();
                        first_id += 1;
                    }
                    let latency = c.time_ns - at;
                    hash.add(c.id);
                    hash.add(c.time_ns);
                    match op {
                        Op::Read => r.reads.record(latency),
                        Op::Write => r.writes.record(latency),
                    }
                    r.complete();
                }
            }
            (None, Some((at, record))) => {
                pending.next();
                r.advance_to(at, device);
                last_arrival = at;
                let mut offset = record.offset_bytes;
                if offset + record.length_bytes > capacity {
                    offset = offset % (capacity - record.length_bytes + 1) / 512 * 512;
                    r.wrapped += 1;
                }
                let id = next_id;
                next_id += 1;
                submitted.push_back(Some((at, record.op)));
                hash.add(id);
                hash.add(at);
                device.submit(
                    at,
                    IoRequest {
                        id,
                        op: record.op,
                        offset_bytes: offset,
                        length_bytes: record.length_bytes,
                    },
                );
                if let Some(response_ns) = record.response_ns {
                    match record.op {
                        Op::Read => r.recorded_reads.record(response_ns),
                        Op::Write => r.recorded_writes.record(response_ns),
                    }
                }
                r.records += 1;
                r.arrive();
            }
            (None, None) => break,
        }
    }
    r.finish(device, hash)
}

/// The running figures of a replay.
struct Run {
    interval_ns: u64,
    now: Nanos,
    first: Option<Nanos>,
    outstanding: u64,
    max_queue: u64,
    queue_area: u128,
    records: u64,
    skipped_empty: u64,
    wrapped: u64,
    late: u64,
    reads: Histogram,
    writes: Histogram,
    recorded_reads: Histogram,
    recorded_writes: Histogram,
    intervals: Vec<Interval>,
    interval_area: u128,
    interval_busy_start: u64,
}

impl Run {
    fn new(interval_ns: u64) -> Run {
        Run {
            interval_ns,
            now: 0,
            first: None,
            outstanding: 0,
            max_queue: 0,
            queue_area: 0,
            records: 0,
            skipped_empty: 0,
            wrapped: 0,
            late: 0,
            reads: Histogram::new(),
            writes: Histogram::new(),
            recorded_reads: Histogram::new(),
            recorded_writes: Histogram::new(),
            intervals: vec![Interval {
                start_s: 0.0,
                completions: 0,
                mean_queue: 0.0,
                max_queue: 0,
                utilization: 0.0,
            }],
            interval_area: 0,
            interval_busy_start: 0,
        }
    }

    /// Moves time forward, integrating the queue length and closing intervals.
    fn advance_to(&mut self, t: Nanos, device: &dyn Device) {
        self.first.get_or_insert(t);
        while t >= (self.intervals.len() as u64) * self.interval_ns {
            let end = self.intervals.len() as u64 * self.interval_ns;
            self.interval_area += self.outstanding as u128 * (end - self.now) as u128;
            self.queue_area += self.outstanding as u128 * (end - self.now) as u128;
            self.now = end;
            let busy = device.busy_ns();
            let current = self.intervals.last_mut().expect("interval");
            current.mean_queue = self.interval_area as f64 / self.interval_ns as f64;
            current.utilization =
                (busy - self.interval_busy_start) as f64 / self.interval_ns as f64;
            self.interval_busy_start = busy;
            self.interval_area = 0;
            self.intervals.push(Interval {
                start_s: end as f64 / 1e9,
                completions: 0,
                mean_queue: 0.0,
                max_queue: self.outstanding,
                utilization: 0.0,
            });
        }
        self.interval_area += self.outstanding as u128 * (t - self.now) as u128;
        self.queue_area += self.outstanding as u128 * (t - self.now) as u128;
        self.now = t;
    }

    fn arrive(&mut self) {
        self.outstanding += 1;
        self.max_queue = self.max_queue.max(self.outstanding);
        let current = self.intervals.last_mut().expect("interval");
        current.max_queue = current.max_queue.max(self.outstanding);
    }

    fn complete(&mut self) {
        self.outstanding -= 1;
        self.intervals.last_mut().expect("interval").completions += 1;
    }

    fn finish(mut self, device: &dyn Device, hash: EventHash) -> ReplayReport {
        let start = self.intervals.len() as u64 - 1;
        let partial_ns = (self.now - start * self.interval_ns).max(1);
        let busy = device.busy_ns();
        let current = self.intervals.last_mut().expect("interval");
        current.mean_queue = self.interval_area as f64 / partial_ns as f64;
        current.utilization = (busy - self.interval_busy_start) as f64 / partial_ns as f64;
        let duration_ns = self.now - self.first.unwrap_or(0);
        let recorded = |h: &Histogram| (h.count() > 0).then(|| h.summary());
        ReplayReport {
            records: self.records,
            skipped_empty: self.skipped_empty,
            wrapped: self.wrapped,
            late: self.late,
            duration_s: duration_ns as f64 / 1e9,
            reads: self.reads.summary(),
            writes: self.writes.summary(),
            utilization: if self.now > 0 {
                busy as f64 / self.now as f64
            } else {
                0.0
            },
            mean_queue: if self.now > 0 {
                self.queue_area as f64 / self.now as f64
            } else {
                0.0
            },
            max_queue: self.max_queue,
            interval_s: self.interval_ns as f64 / 1e9,
            intervals: self.intervals,
            recorded_reads: recorded(&self.recorded_reads),
            recorded_writes: recorded(&self.recorded_writes),
            run_hash: hash.0,
        }
    }
}
