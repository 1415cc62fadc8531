//! The gear scheduler's load metric (§3.4), in chunk servers needed:
//!
//! ```text
//! L_nonseq = IOPS_read / ServerIOPS_read + r · IOPS_write / ServerIOPS_write
//! L_seq    = MBPS_read / ServerMBPS_read + r · MBPS_write / ServerMBPS_write
//! L        = max(L_nonseq, L_seq)
//! ```
//!
//! from cluster-total rates sampled every second (writes weighted by r, since each is written r
//! times). Random I/Os count in the IOPS terms, sequential I/Os in the MB/s terms. The hour's
//! load is the peak of its seconds ("since I/O load is often bursty, using the mean value can
//! significantly degrade performance during bursts"); the mean is kept too.
//!
//! # What counts as sequential
//!
//! The paper measures the two rates separately but does not say how an I/O is classified. Here
//! an I/O is **sequential** when it continues a stream: it starts within
//! [`SEQUENTIAL_GAP_BYTES`] after the end of one of the last [`STREAMS_PER_VOLUME_MAX`] I/Os of
//! the same direction on the same volume (so interleaved streams are each recognised), or when
//! it is at least [`SEQUENTIAL_REQUEST_BYTES`] long on its own (a transfer that size is dominated
//! by streaming, not positioning). Everything else is **random**. The first I/O of a stream is
//! random: one positioning, then streaming.

use std::collections::BTreeMap;

use serde::Serialize;

use cordillera_trace::{Record, VolumeId};
use cordillera_types::units::{MIB, NS_PER_HOUR, NS_PER_S};
use cordillera_types::Op;

/// An I/O starting this far past the end of a recent one continues its stream.
pub const SEQUENTIAL_GAP_BYTES: u64 = 64 * 1024;

/// Recent I/O ends remembered per volume and direction, so interleaved streams each count.
pub const STREAMS_PER_VOLUME_MAX: usize = 8;

/// An I/O this long is sequential by itself.
pub const SEQUENTIAL_REQUEST_BYTES: u64 = 256 * 1024;

/// What one chunk server sustains (§4.6 Table 4: benchmarked on the servers themselves).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ServerPerformance {
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
}

impl ServerPerformance {
    /// Table 4's averages: 137 read and 179 write IOPS, 82 MB/s each way.
    pub fn sierra_table4() -> ServerPerformance {
        ServerPerformance {
            read_iops: 137.0,
            write_iops: 179.0,
            read_bytes_per_s: 82.0 * MIB as f64,
            write_bytes_per_s: 82.0 * MIB as f64,
        }
    }
}

/// Cluster-total I/O in one interval, split by direction and by random or sequential.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Rates {
    pub random_reads: f64,
    pub random_writes: f64,
    pub sequential_read_bytes: f64,
    pub sequential_write_bytes: f64,
}

/// L and its two parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Load {
    pub nonsequential: f64,
    pub sequential: f64,
}

impl Load {
    /// L = max(L_nonseq, L_seq).
    pub fn servers(&self) -> f64 {
        self.nonsequential.max(self.sequential)
    }

    /// The load of `rates` per second, in servers of `server` performance, with writes weighted
    /// by `replicas`.
    pub fn of(rates: &Rates, server: &ServerPerformance, replicas: usize) -> Load {
        let r = replicas as f64;
        Load {
            nonsequential: rates.random_reads / server.read_iops
                + r * rates.random_writes / server.write_iops,
            sequential: rates.sequential_read_bytes / server.read_bytes_per_s
                + r * rates.sequential_write_bytes / server.write_bytes_per_s,
        }
    }
}

/// Classifies I/Os as random or sequential (see the module's documentation).
#[derive(Clone, Debug, Default)]
pub struct SequentialDetector {
    /// (volume, is a write) → ends of the most recent I/Os, newest last.
    recent_ends: BTreeMap<(VolumeId, bool), Vec<u64>>,
}

impl SequentialDetector {
    /// Whether this I/O is sequential; it becomes part of the history either way.
    pub fn classify(
        &mut self,
        volume: VolumeId,
        op: Op,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> bool {
        let ends = self
            .recent_ends
            .entry((volume, op == Op::Write))
            .or_default();
        let continues = ends
            .iter()
            .position(|&end| offset_bytes >= end && offset_bytes - end < SEQUENTIAL_GAP_BYTES);
        let end = offset_bytes.saturating_add(length_bytes);
        match continues {
            Some(i) => {
                ends.remove(i);
            }
            None if ends.len() >= STREAMS_PER_VOLUME_MAX => {
                ends.remove(0);
            }
            None => {}
        }
        ends.push(end);
        continues.is_some() || length_bytes >= SEQUENTIAL_REQUEST_BYTES
    }
}

/// One hour of load (hours counted from the wall clock's hour 0 of day 0, see [`LoadMeter`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct HourLoad {
    /// Hours since the start of the trace's first day.
    pub hour: i64,
    /// The largest L of the hour's seconds (intervals, [`LoadMeter::with_interval`]), and its
    /// parts then.
    pub peak: f64,
    pub peak_nonsequential: f64,
    pub peak_sequential: f64,
    /// The mean L over the seconds of the hour the trace covers.
    pub mean: f64,
    /// Bytes transferred in the hour (Figure 8's metric for the load traces).
    pub bytes: u64,
    /// Of which written.
    pub write_bytes: u64,
    pub requests: u64,
    /// Seconds of the hour inside the trace.
    pub covered_s: u64,
}

impl HourLoad {
    pub fn day(&self) -> i64 {
        self.hour.div_euclid(24)
    }
    pub fn hour_of_day(&self) -> usize {
        self.hour.rem_euclid(24) as usize
    }
}

/// Measures L every second from a stream of records, and keeps each hour's peak and mean.
///
/// `start_ns` places the trace on the clock: the time of day, in nanoseconds since a midnight,
/// at which the trace's time 0 falls (wall clock plus any offset to local time, so that hours of
/// day are the service's). Memory is one entry per hour plus the per-volume stream history.
#[derive(Clone, Debug)]
pub struct LoadMeter {
    server: ServerPerformance,
    replicas: usize,
    start_ns: i64,
    detector: SequentialDetector,
    /// The measurement interval (the paper's second).
    interval_ns: i64,
    interval: Option<i64>,
    rates: Rates,
    hours: BTreeMap<i64, HourLoad>,
    /// Per hour, the sum of L × interval seconds.
    sum_in_hour: BTreeMap<i64, f64>,
    first_interval: Option<i64>,
    last_interval: i64,
}

impl LoadMeter {
    pub fn new(server: ServerPerformance, replicas: usize, start_ns: i64) -> LoadMeter {
        LoadMeter {
            server,
            replicas,
            start_ns,
            detector: SequentialDetector::default(),
            interval_ns: NS_PER_S,
            interval: None,
            rates: Rates::default(),
            hours: BTreeMap::new(),
            sum_in_hour: BTreeMap::new(),
            first_interval: None,
            last_interval: 0,
        }
    }

    /// Measures L over intervals of `interval_ns` instead of one second: for a trace replayed
    /// `k` times faster than it was recorded, an interval of `k` seconds of the trace is one
    /// second of the replay (the hour's peak is then the replay's busiest second, as the
    /// servers see it). An interval that spans an hour boundary counts in the hour it starts.
    pub fn with_interval(mut self, interval_ns: i64) -> LoadMeter {
        assert!(interval_ns > 0, "a positive interval");
        self.interval_ns = interval_ns;
        self
    }

    /// Adds one record; records come in time order (a record earlier than the current second is
    /// counted in it).
    pub fn add(&mut self, record: &Record) {
        let at_ns = self.start_ns + record.time_ns;
        let interval = at_ns.div_euclid(self.interval_ns);
        match self.interval {
            Some(current) if interval > current => {
                self.close_interval(current);
                self.interval = Some(interval);
            }
            None => {
                self.interval = Some(interval);
                self.first_interval.get_or_insert(interval);
            }
            _ => {}
        }
        let sequential = self.detector.classify(
            record.volume,
            record.op,
            record.offset_bytes,
            record.length_bytes,
        );
        let bytes = record.length_bytes as f64;
        match (record.op, sequential) {
            (Op::Read, false) => self.rates.random_reads += 1.0,
            (Op::Write, false) => self.rates.random_writes += 1.0,
            (Op::Read, true) => self.rates.sequential_read_bytes += bytes,
            (Op::Write, true) => self.rates.sequential_write_bytes += bytes,
        }
        let hour = self.hours.entry(hour_of_ns(at_ns)).or_default();
        hour.bytes += record.length_bytes;
        if record.op == Op::Write {
            hour.write_bytes += record.length_bytes;
        }
        hour.requests += 1;
    }

    fn close_interval(&mut self, interval: i64) {
        let interval_s = self.interval_ns as f64 / NS_PER_S as f64;
        let r = &self.rates;
        let per_second = Rates {
            random_reads: r.random_reads / interval_s,
            random_writes: r.random_writes / interval_s,
            sequential_read_bytes: r.sequential_read_bytes / interval_s,
            sequential_write_bytes: r.sequential_write_bytes / interval_s,
        };
        let load = Load::of(&per_second, &self.server, self.replicas);
        let key = hour_of_ns(interval * self.interval_ns);
        let hour = self.hours.entry(key).or_default();
        if load.servers() > hour.peak {
            hour.peak = load.servers();
            hour.peak_nonsequential = load.nonsequential;
            hour.peak_sequential = load.sequential;
        }
        *self.sum_in_hour.entry(key).or_default() += load.servers() * interval_s;
        self.rates = Rates::default();
        self.last_interval = interval;
    }

    /// Every hour from the first to the last the trace touches (hours without I/O have zero
    /// load), with coverage: the first and last may be partial.
    pub fn finish(mut self) -> Vec<HourLoad> {
        let Some(current) = self.interval else {
            return Vec::new();
        };
        self.close_interval(current);
        let first = self.first_interval.expect("a first interval");
        let first_s = (first * self.interval_ns).div_euclid(NS_PER_S);
        let last_s = ((self.last_interval + 1) * self.interval_ns - 1).div_euclid(NS_PER_S);
        let (first_hour, last_hour) = (hour_of_second(first_s), hour_of_second(last_s));
        let hour_s = NS_PER_HOUR / NS_PER_S;
        (first_hour..=last_hour)
            .map(|h| {
                let mut hour = self.hours.get(&h).copied().unwrap_or_default();
                hour.hour = h;
                let from = (h * hour_s).max(first_s);
                let to = ((h + 1) * hour_s).min(last_s + 1);
                hour.covered_s = (to - from).max(1) as u64;
                hour.mean =
                    self.sum_in_hour.get(&h).copied().unwrap_or(0.0) / hour.covered_s as f64;
                hour
            })
            .collect()
    }
}

fn hour_of_second(second: i64) -> i64 {
    second.div_euclid(NS_PER_HOUR / NS_PER_S)
}

fn hour_of_ns(at_ns: i64) -> i64 {
    at_ns.div_euclid(NS_PER_HOUR)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(time_s: f64, op: Op, offset: u64, length: u64) -> Record {
        Record {
            time_ns: (time_s * 1e9) as i64,
            volume: VolumeId(0),
            op,
            offset_bytes: offset,
            length_bytes: length,
            response_ns: None,
        }
    }

    #[test]
    fn streams_are_sequential_and_scattered_io_random() {
        let mut d = SequentialDetector::default();
        let v = VolumeId(0);
        assert!(
            !d.classify(v, Op::Read, 0, 65536),
            "a stream's first I/O is random"
        );
        assert!(d.classify(v, Op::Read, 65536, 65536));
        assert!(
            !d.classify(v, Op::Write, 131072, 4096),
            "the other direction is another stream"
        );
        assert!(!d.classify(v, Op::Read, 1 << 30, 4096));
        assert!(
            d.classify(v, Op::Read, 131072 + 4096, 4096),
            "within the gap after the stream"
        );
        assert!(
            d.classify(v, Op::Read, (1 << 30) + 4096, 4096),
            "an interleaved second stream"
        );
        assert!(
            d.classify(v, Op::Write, 1 << 40, SEQUENTIAL_REQUEST_BYTES),
            "large on its own"
        );
        assert!(
            !d.classify(VolumeId(1), Op::Read, 196608, 4096),
            "another volume"
        );
    }

    #[test]
    fn the_hour_is_its_peak_second_and_writes_weigh_r() {
        let server = ServerPerformance {
            read_iops: 100.0,
            write_iops: 100.0,
            read_bytes_per_s: 1e6,
            write_bytes_per_s: 1e6,
        };
        let mut meter = LoadMeter::new(server, 3, 0);
        // Second 0: 50 random reads (0.5 servers); second 10: 50 random writes (1.5 servers).
        for i in 0..50u64 {
            meter.add(&record(0.01 * i as f64, Op::Read, i * (1 << 20), 4096));
        }
        for i in 0..50u64 {
            meter.add(&record(
                10.0 + 0.01 * i as f64,
                Op::Write,
                i * (1 << 20),
                4096,
            ));
        }
        // An hour later: a 2 MB/s sequential read stream for one second (2 servers).
        for i in 0..32u64 {
            meter.add(&record(
                3600.0 + i as f64 / 32.0,
                Op::Read,
                i * 65536,
                65536,
            ));
        }
        let hours = meter.finish();
        assert_eq!(hours.len(), 2);
        assert!((hours[0].peak - 1.5).abs() < 1e-9, "{hours:?}");
        assert!((hours[0].peak_nonsequential - 1.5).abs() < 1e-9);
        assert!(
            (hours[0].mean - 2.0 / 3600.0).abs() < 1e-12,
            "{}",
            hours[0].mean
        );
        assert_eq!(hours[0].requests, 100);
        // 31 of the 32 continue the stream: 31 × 64 KiB per second in MB/s over 1e6.
        let sequential = 31.0 * 65536.0 / 1e6;
        assert!((hours[1].peak - sequential).abs() < 1e-9, "{hours:?}");
        assert_eq!(hours[1].hour_of_day(), 1);
    }

    #[test]
    fn a_longer_interval_measures_a_replay_second() {
        let server = ServerPerformance {
            read_iops: 100.0,
            write_iops: 100.0,
            read_bytes_per_s: 1e6,
            write_bytes_per_s: 1e6,
        };
        // 100 random reads in second 0 of each 10 s, for a minute.
        let meter_for = |interval_ns: i64| {
            let mut meter = LoadMeter::new(server, 3, 0).with_interval(interval_ns);
            for burst in 0..6u64 {
                for i in 0..100u64 {
                    let t = 10.0 * burst as f64 + 0.005 * i as f64;
                    meter.add(&record(t, Op::Read, (burst * 100 + i) << 20, 4096));
                }
            }
            meter.finish()
        };
        let by_second = meter_for(NS_PER_S);
        assert!((by_second[0].peak - 1.0).abs() < 1e-9, "{by_second:?}");
        // Ten seconds as one: 100 reads over 10 s, 0.1 servers; the mean is the same either way.
        let by_ten = meter_for(10 * NS_PER_S);
        assert!((by_ten[0].peak - 0.1).abs() < 1e-9, "{by_ten:?}");
        assert_eq!(by_ten[0].requests, 600);
        assert_eq!(by_second[0].covered_s, 51);
        assert_eq!(by_ten[0].covered_s, 60);
        assert!((by_second[0].mean - 600.0 / 100.0 / 51.0).abs() < 1e-9);
        assert!((by_ten[0].mean - 600.0 / 100.0 / 60.0).abs() < 1e-9);
    }
}
