//! The pool on the simulator: every disk of every array a modelled disk (the calibrated
//! `fujitsu-maj3182mc` by default), requests of many volumes replayed open loop, per-volume
//! response times and per-array utilization over time.

use std::collections::VecDeque;

use cordillera_models::device::raid::{Plan, Planner, Raid};
use cordillera_models::device::{Completion, Device, IoRequest};
use cordillera_models::histogram::Histogram;
use cordillera_models::presets;
use cordillera_sim::kernel::Nanos;
use cordillera_trace::Record;
use cordillera_types::Op;

use cordillera_striping::pool::{Pool, VolumeId};

/// Bits of a pool-wide address below the volume index: a volume spans at most 16 TiB.
pub const VOLUME_SHIFT: u32 = 44;

/// The pool as a [`Planner`]: address `(i << VOLUME_SHIFT) + offset` is byte `offset` of the
/// i-th volume (in [`Pool::volumes`] order).
pub struct PoolPlanner {
    pool: Pool,
    ids: Vec<VolumeId>,
}

impl PoolPlanner {
    pub fn new(pool: Pool) -> PoolPlanner {
        let ids = pool.volumes().map(|v| v.id).collect();
        PoolPlanner { pool, ids }
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Volumes by index (the index records carry).
    pub fn ids(&self) -> &[VolumeId] {
        &self.ids
    }
}

impl Planner for PoolPlanner {
    fn capacity_bytes(&self) -> u64 {
        (self.ids.len() as u64) << VOLUME_SHIFT
    }

    fn plan_into(
        &self,
        op: Op,
        offset: u64,
        size: u64,
        _prefer: &dyn Fn(usize, usize) -> usize,
        plan: &mut Plan,
        _pieces: &mut Vec<(usize, u64, u64, u64)>,
    ) {
        let index = (offset >> VOLUME_SHIFT) as usize;
        let within = offset & ((1 << VOLUME_SHIFT) - 1);
        self.pool
            .plan(self.ids[index], op, within, size, plan)
            .expect("the driver keeps requests inside their volume");
    }
}

pub type PoolDevice = Raid<Box<dyn Device>, PoolPlanner>;

/// The pool's disks as modelled disks of `preset`; each must hold its array's `disk_bytes`.
pub fn device(pool: Pool, preset: &str) -> Result<PoolDevice, String> {
    device_with(pool, &|| presets::device(preset))
}

/// The pool's disks, each made by `disk`; each must hold its array's `disk_bytes`.
pub fn device_with(
    pool: Pool,
    disk: &dyn Fn() -> Result<Box<dyn Device>, String>,
) -> Result<PoolDevice, String> {
    let mut members: Vec<Box<dyn Device>> = Vec::with_capacity(pool.disks());
    for (a, spec) in pool.arrays().iter().enumerate() {
        for _ in 0..spec.disks {
            let d = disk()?;
            if d.capacity_bytes() < spec.disk_bytes {
                return Err(format!(
                    "array {a}: the disk holds {} bytes, not the {} each disk needs",
                    d.capacity_bytes(),
                    spec.disk_bytes
                ));
            }
            members.push(d);
        }
    }
    Ok(Raid::with_planner(PoolPlanner::new(pool), members))
}

/// Response times of one volume's requests.
#[derive(Clone, Debug)]
pub struct VolumeFigures {
    pub name: String,
    pub requests: u64,
    pub histogram: Histogram,
}

impl VolumeFigures {
    pub fn mean_ms(&self) -> Option<f64> {
        self.histogram.mean_ns().map(|n| n / 1e6)
    }
    pub fn p95_ms(&self) -> Option<f64> {
        self.histogram.quantile_ns(0.95).map(|n| n as f64 / 1e6)
    }
}

#[derive(Clone, Debug)]
pub struct RunReport {
    pub volumes: Vec<VolumeFigures>,
    /// Per array, the mean utilization of its disks in each interval.
    pub array_utilization: Vec<Vec<f64>>,
    /// Per array, over the whole run.
    pub array_mean_utilization: Vec<f64>,
    /// The fraction of the run with a request outstanding anywhere in the pool (on a one-array
    /// pool, the array's busy fraction as a single server).
    pub busy_fraction: f64,
    pub interval_s: f64,
    /// Simulated time from the first arrival to the last completion.
    pub duration_s: f64,
    /// Requests that did not fit their volume at their offset and were moved inside it
    /// (`offset mod (size − length)`, 512-aligned); requests longer than the volume are skipped.
    pub wrapped: u64,
    pub skipped: u64,
}

/// Each array's utilization per interval of a run: the busy time of its disks over the
/// interval, per disk.
struct UtilizationMeter {
    /// Each array's disks, numbered pool-wide.
    disks_of: Vec<std::ops::Range<usize>>,
    interval_ns: u64,
    busy_at_start: Vec<u64>,
    next_boundary: Nanos,
    series: Vec<Vec<f64>>,
}

impl UtilizationMeter {
    fn new(device: &PoolDevice, interval_ns: u64) -> UtilizationMeter {
        let pool = device.layout().pool();
        let arrays = pool.arrays();
        let disks_of: Vec<std::ops::Range<usize>> = (0..arrays.len())
            .map(|a| pool.disk_index(a, 0)..pool.disk_index(a, 0) + arrays[a].disks)
            .collect();
        let mut meter = UtilizationMeter {
            series: vec![Vec::new(); disks_of.len()],
            disks_of,
            interval_ns,
            busy_at_start: Vec::new(),
            next_boundary: interval_ns,
        };
        meter.busy_at_start = meter.busy(device);
        meter
    }

    /// Each array's disks' busy time so far.
    fn busy(&self, device: &PoolDevice) -> Vec<u64> {
        self.disks_of
            .iter()
            .map(|r| {
                device.members()[r.clone()]
                    .iter()
                    .map(|m| m.busy_ns())
                    .sum()
            })
            .collect()
    }

    /// Closes every interval ending at or before `t`.
    fn close(&mut self, t: Nanos, device: &PoolDevice) {
        while t >= self.next_boundary {
            let now = self.busy(device);
            for (a, (b, s)) in now.iter().zip(&self.busy_at_start).enumerate() {
                let disks = self.disks_of[a].len() as f64;
                self.series[a].push((b - s) as f64 / self.interval_ns as f64 / disks);
            }
            self.busy_at_start = now;
            self.next_boundary += self.interval_ns;
        }
    }

    /// The series with the last, partial interval (unless shorter than half the others: it
    /// would only add noise), and each array's mean utilization over the run to `end`.
    fn finish(mut self, end: Nanos, device: &PoolDevice) -> (Vec<Vec<f64>>, Vec<f64>) {
        let now = self.busy(device);
        let partial = end + self.interval_ns - self.next_boundary;
        if partial >= self.interval_ns / 2 {
            for (a, (b, s)) in now.iter().zip(&self.busy_at_start).enumerate() {
                let disks = self.disks_of[a].len() as f64;
                self.series[a].push((b - s) as f64 / partial as f64 / disks);
            }
        }
        let means = now
            .iter()
            .enumerate()
            .map(|(a, b)| {
                if end == 0 {
                    0.0
                } else {
                    *b as f64 / end as f64 / self.disks_of[a].len() as f64
                }
            })
            .collect();
        (self.series, means)
    }
}

/// Replays `records` (time order; `volume` is the index into the pool's volumes) open loop on
/// the pool, each at its time whatever the disks' state.
pub fn run(
    device: &mut PoolDevice,
    records: impl Iterator<Item = Record>,
    interval_ns: u64,
) -> RunReport {
    assert!(interval_ns > 0);
    let pool = device.layout().pool().clone();
    let ids = device.layout().ids().to_vec();
    let sizes: Vec<u64> = ids
        .iter()
        .map(|id| pool.volume(*id).expect("volume").size_bytes)
        .collect();
    let mut volumes: Vec<VolumeFigures> = ids
        .iter()
        .map(|id| VolumeFigures {
            name: pool.volume(*id).expect("volume").name.clone(),
            requests: 0,
            histogram: Histogram::new(),
        })
        .collect();
    let mut meter = UtilizationMeter::new(device, interval_ns);
    let mut submitted: VecDeque<Option<(Nanos, usize)>> = VecDeque::new();
    let (mut first_id, mut next_id) = (0u64, 0u64);
    let mut origin: Option<i64> = None;
    let mut first_arrival: Option<Nanos> = None;
    let (mut last_arrival, mut last_completion) = (0, 0);
    let (mut wrapped, mut skipped) = (0, 0);
    let mut completions: Vec<Completion> = Vec::new();
    // Requests outstanding, since when some have been, and the time with some outstanding.
    let (mut outstanding, mut busy_since, mut busy_ns) = (0usize, 0, 0);
    let mut pending = records.peekable();
    loop {
        let arrival = loop {
            let Some(r) = pending.peek().copied() else {
                break None;
            };
            let v = r.volume.0 as usize;
            if r.length_bytes == 0 || v >= sizes.len() || r.length_bytes > sizes[v] {
                skipped += 1;
                pending.next();
                continue;
            }
            let origin = *origin.get_or_insert(r.time_ns);
            let at = (r.time_ns.saturating_sub(origin).max(0) as Nanos).max(last_arrival);
            break Some((at, r));
        };
        let due = match (device.poll_timeout(), &arrival) {
            (Some(t), Some((at, _))) => (t <= *at).then_some(t),
            (t, None) => t,
            (None, Some(_)) => None,
        };
        match (due, arrival) {
            (Some(t), _) => {
                meter.close(t, device);
                device.advance(t, &mut completions);
                for c in completions.drain(..) {
                    let (at, v) = submitted[(c.id - first_id) as usize]
                        .take()
                        .expect("one completion per request");
                    while submitted.front().is_some_and(Option::is_none) {
                        submitted.pop_front();
                        first_id += 1;
                    }
                    volumes[v].histogram.record(c.time_ns - at);
                    last_completion = last_completion.max(c.time_ns);
                    outstanding -= 1;
                    if outstanding == 0 {
                        busy_ns += c.time_ns.saturating_sub(busy_since);
                    }
                }
            }
            (None, Some((at, r))) => {
                pending.next();
                meter.close(at, device);
                first_arrival.get_or_insert(at);
                last_arrival = at;
                let v = r.volume.0 as usize;
                let mut offset = r.offset_bytes;
                if offset + r.length_bytes > sizes[v] {
                    offset = offset % (sizes[v] - r.length_bytes + 1) / 512 * 512;
                    wrapped += 1;
                }
                let id = next_id;
                next_id += 1;
                submitted.push_back(Some((at, v)));
                volumes[v].requests += 1;
                if outstanding == 0 {
                    busy_since = at;
                }
                outstanding += 1;
                device.submit(
                    at,
                    IoRequest {
                        id,
                        op: r.op,
                        offset_bytes: ((v as u64) << VOLUME_SHIFT) + offset,
                        length_bytes: r.length_bytes,
                    },
                );
            }
            (None, None) => break,
        }
    }
    let end = last_completion.max(last_arrival);
    let span = end.saturating_sub(first_arrival.unwrap_or(0));
    let (utilization, array_mean_utilization) = meter.finish(end, device);
    RunReport {
        volumes,
        array_utilization: utilization,
        array_mean_utilization,
        busy_fraction: if end == 0 {
            0.0
        } else {
            busy_ns as f64 / end as f64
        },
        interval_s: interval_ns as f64 / 1e9,
        duration_s: span as f64 / 1e9,
        wrapped,
        skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_striping::pool::ArraySpec;
    use cordillera_trace::VolumeId as TraceVolume;

    fn record(t_ms: i64, volume: u32, offset: u64, length: u64) -> Record {
        Record {
            time_ns: t_ms * 1_000_000,
            volume: TraceVolume(volume),
            op: Op::Read,
            offset_bytes: offset,
            length_bytes: length,
            response_ns: None,
        }
    }

    /// One 64 KiB read alone on an idle pool takes a disk's positioning plus transfer; two
    /// narrow volumes on distinct arrays do not slow each other, on one array they queue.
    #[test]
    fn volumes_on_distinct_arrays_do_not_interfere_and_on_one_they_queue() {
        let specs = [ArraySpec::raid5_4p(1 << 30); 2];
        let mut apart = Pool::new(&specs).unwrap();
        apart.create("a", 1 << 30, 64 << 10, &[0]).unwrap();
        apart.create("b", 1 << 30, 64 << 10, &[1]).unwrap();
        let mut together = Pool::new(&specs).unwrap();
        together.create("a", 1 << 30, 64 << 10, &[0]).unwrap();
        together.create("b", 1 << 30, 64 << 10, &[0]).unwrap();
        // Both volumes read the same unit at the same instant: on one array, the same disk.
        let load = || {
            (0..50).flat_map(|i| {
                [
                    record(i * 100, 0, 0, 64 << 10),
                    record(i * 100, 1, 0, 64 << 10),
                ]
            })
        };
        let mut d = device(apart, "fujitsu-maj3182mc").unwrap();
        let a = run(&mut d, load(), 1_000_000_000);
        let mut d = device(together, "fujitsu-maj3182mc").unwrap();
        let t = run(&mut d, load(), 1_000_000_000);
        let (ma, mb) = (
            a.volumes[0].mean_ms().unwrap(),
            a.volumes[1].mean_ms().unwrap(),
        );
        // A 64 KiB read at 39.16 MB/s plus positioning: a few ms.
        assert!((2.0..20.0).contains(&ma), "{ma}");
        assert!((ma - mb).abs() < 0.2 * ma, "apart: {ma} vs {mb}");
        let tb = t.volumes[1].mean_ms().unwrap();
        assert!(
            tb > 1.5 * mb,
            "together, one waits for the other: {tb} vs {mb}"
        );
        assert_eq!(a.volumes[0].requests, 50);
        assert!(a.array_mean_utilization.iter().all(|u| *u > 0.0));
        assert_eq!(t.array_mean_utilization[1], 0.0, "array 1 holds nothing");
        assert_eq!(a.array_utilization[0].len(), 5);
    }
}
