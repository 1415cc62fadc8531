//! `trace profile`: load over time, the way Sierra §2 shows it — per bucket (1 h), per hour of
//! day (Figure 1), per day, and the CDF of time spent at each fraction of the peak (Figure 2).
//!
//! Buckets are aligned to wall-clock hours (UTC plus an offset) when the trace has a wall clock,
//! to the trace start otherwise. Rates divide a bucket's load by the part of the bucket the trace
//! covers, so the partial first and last buckets are not understated.

use cordillera_types::units::{ns_to_s, NS_PER_DAY, NS_PER_HOUR};
use serde::Serialize;

use crate::record::{Record, TraceInfo};
use crate::window::{window_of, WindowCounts};

/// Buckets a report may hold: a year of 1 s buckets, or 3,000 years of 1 h buckets.
pub const PROFILE_BUCKETS_MAX: i64 = 32 * 1024 * 1024;

/// Fractions of the peak at which the CDF is reported: 0, 0.05, …, 1.
const CDF_STEPS: usize = 20;

#[derive(Clone, Debug, Serialize)]
pub struct Bucket {
    /// Seconds from the trace start (negative for the part of a bucket before it).
    pub start_s: f64,
    pub start_unix_ns: Option<i64>,
    pub hour_of_day: u32,
    pub day: i64,
    pub requests: u64,
    pub bytes: u64,
    /// Seconds of the bucket inside the trace.
    pub covered_s: f64,
    pub iops: f64,
    pub bytes_per_s: f64,
    /// `bytes_per_s` over the largest bucket's.
    pub utilization: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct HourOfDay {
    pub hour: u32,
    pub buckets: u64,
    pub mean_iops: f64,
    pub mean_bytes_per_s: f64,
    /// `mean_bytes_per_s` over the busiest hour's.
    pub normalized: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Day {
    pub day: i64,
    pub start_unix_ns: Option<i64>,
    pub requests: u64,
    pub bytes: u64,
    pub covered_s: f64,
    pub mean_iops: f64,
    pub mean_bytes_per_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CdfPoint {
    /// Load as a fraction of the peak bucket.
    pub fraction_of_peak: f64,
    /// Fraction of the trace's time spent at or below it, by bytes and by requests.
    pub time_fraction_bytes: f64,
    pub time_fraction_requests: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProfileReport {
    pub bucket_s: f64,
    pub wall_clock: bool,
    pub utc_offset_h: i64,
    pub buckets: Vec<Bucket>,
    pub hours_of_day: Vec<HourOfDay>,
    pub days: Vec<Day>,
    pub peak_to_mean_bytes: Option<f64>,
    pub cdf: Vec<CdfPoint>,
}

/// Accumulates a [`ProfileReport`].
pub struct ProfileBuilder {
    bucket_ns: i64,
    utc_offset_ns: i64,
    /// Trace time of a bucket boundary; set by the first record.
    anchor_ns: Option<i64>,
    min_ns: i64,
    max_ns: i64,
    requests: WindowCounts,
    bytes: WindowCounts,
}

impl ProfileBuilder {
    /// `bucket_ns` must divide a day, so buckets have an hour of day.
    pub fn new(bucket_ns: i64, utc_offset_h: i64) -> Result<ProfileBuilder, String> {
        if bucket_ns <= 0 || NS_PER_DAY % bucket_ns != 0 {
            return Err("the bucket length must divide 24 h".into());
        }
        Ok(ProfileBuilder {
            bucket_ns,
            utc_offset_ns: utc_offset_h * NS_PER_HOUR,
            anchor_ns: None,
            min_ns: i64::MAX,
            max_ns: i64::MIN,
            requests: WindowCounts::new(),
            bytes: WindowCounts::new(),
        })
    }

    pub fn add(&mut self, record: &Record, info: &TraceInfo) {
        let anchor = *self.anchor_ns.get_or_insert_with(|| {
            // Trace time 0 is wall clock `origin + offset`; the previous midnight is a boundary.
            match info.origin_unix_ns {
                Some(origin) => -(origin + self.utc_offset_ns).rem_euclid(NS_PER_DAY),
                None => 0,
            }
        });
        self.min_ns = self.min_ns.min(record.time_ns);
        self.max_ns = self.max_ns.max(record.time_ns);
        let bucket = window_of(record.time_ns, anchor, self.bucket_ns);
        self.requests.add(bucket, 1);
        self.bytes.add(bucket, record.length_bytes);
    }

    /// The report, or an error when the trace spans more than [`PROFILE_BUCKETS_MAX`] buckets
    /// (a stray timestamp, or buckets too small for the span).
    pub fn finish(self, info: &TraceInfo) -> Result<ProfileReport, String> {
        let wall_clock = info.origin_unix_ns.is_some();
        let mut report = ProfileReport {
            bucket_s: ns_to_s(self.bucket_ns),
            wall_clock,
            utc_offset_h: self.utc_offset_ns / NS_PER_HOUR,
            buckets: Vec::new(),
            hours_of_day: Vec::new(),
            days: Vec::new(),
            peak_to_mean_bytes: None,
            cdf: Vec::new(),
        };
        let Some(anchor) = self.anchor_ns else {
            return Ok(report);
        };
        let first = window_of(self.min_ns, anchor, self.bucket_ns);
        let last = window_of(self.max_ns, anchor, self.bucket_ns);
        if (last as i128 - first as i128) >= PROFILE_BUCKETS_MAX as i128 {
            return Err(format!(
                "the trace spans {} buckets of {} s (more than {PROFILE_BUCKETS_MAX}); use a larger --bucket-s",
                last as i128 - first as i128 + 1,
                ns_to_s(self.bucket_ns)
            ));
        }
        let buckets_per_day = NS_PER_DAY / self.bucket_ns;
        for bucket in first..=last {
            let start_ns = anchor + bucket * self.bucket_ns;
            let end_ns = start_ns + self.bucket_ns;
            // A trace that is one instant covers 1 ns, so its single bucket still has a rate.
            let covered_ns =
                (end_ns.min(self.max_ns.max(self.min_ns + 1)) - start_ns.max(self.min_ns)).max(0);
            let (requests, bytes) = (self.requests.get(bucket), self.bytes.get(bucket));
            let covered_s = ns_to_s(covered_ns);
            report.buckets.push(Bucket {
                start_s: ns_to_s(start_ns),
                start_unix_ns: info.origin_unix_ns.map(|o| o + start_ns),
                hour_of_day: (bucket.rem_euclid(buckets_per_day) * self.bucket_ns / NS_PER_HOUR)
                    as u32,
                day: bucket.div_euclid(buckets_per_day),
                requests,
                bytes,
                covered_s,
                iops: if covered_ns > 0 {
                    requests as f64 / covered_s
                } else {
                    0.0
                },
                bytes_per_s: if covered_ns > 0 {
                    bytes as f64 / covered_s
                } else {
                    0.0
                },
                utilization: 0.0,
            });
        }
        let peak_bytes = report
            .buckets
            .iter()
            .map(|b| b.bytes_per_s)
            .fold(0.0, f64::max);
        let peak_iops = report.buckets.iter().map(|b| b.iops).fold(0.0, f64::max);
        for b in &mut report.buckets {
            b.utilization = if peak_bytes > 0.0 {
                b.bytes_per_s / peak_bytes
            } else {
                0.0
            };
        }
        let total_covered: f64 = report.buckets.iter().map(|b| b.covered_s).sum();
        let total_bytes: u64 = report.buckets.iter().map(|b| b.bytes).sum();
        if total_covered > 0.0 && peak_bytes > 0.0 {
            report.peak_to_mean_bytes = Some(peak_bytes / (total_bytes as f64 / total_covered));
        }
        // By hour of day: means of the bucket rates, weighted by coverage.
        for hour in 0..24u32 {
            let of_hour: Vec<&Bucket> = report
                .buckets
                .iter()
                .filter(|b| b.hour_of_day == hour && b.covered_s > 0.0)
                .collect();
            let covered: f64 = of_hour.iter().map(|b| b.covered_s).sum();
            if of_hour.is_empty() {
                continue;
            }
            report.hours_of_day.push(HourOfDay {
                hour,
                buckets: of_hour.len() as u64,
                mean_iops: of_hour.iter().map(|b| b.requests as f64).sum::<f64>() / covered,
                mean_bytes_per_s: of_hour.iter().map(|b| b.bytes as f64).sum::<f64>() / covered,
                normalized: 0.0,
            });
        }
        let busiest = report
            .hours_of_day
            .iter()
            .map(|h| h.mean_bytes_per_s)
            .fold(0.0, f64::max);
        for h in &mut report.hours_of_day {
            h.normalized = if busiest > 0.0 {
                h.mean_bytes_per_s / busiest
            } else {
                0.0
            };
        }
        for b in &report.buckets {
            match report.days.last_mut() {
                Some(day) if day.day == b.day => {
                    day.requests += b.requests;
                    day.bytes += b.bytes;
                    day.covered_s += b.covered_s;
                }
                _ => report.days.push(Day {
                    day: b.day,
                    start_unix_ns: info.origin_unix_ns.map(|o| o + anchor + b.day * NS_PER_DAY),
                    requests: b.requests,
                    bytes: b.bytes,
                    covered_s: b.covered_s,
                    mean_iops: 0.0,
                    mean_bytes_per_s: 0.0,
                }),
            }
        }
        for d in &mut report.days {
            if d.covered_s > 0.0 {
                d.mean_iops = d.requests as f64 / d.covered_s;
                d.mean_bytes_per_s = d.bytes as f64 / d.covered_s;
            }
        }
        if total_covered > 0.0 {
            for step in 0..=CDF_STEPS {
                let fraction = step as f64 / CDF_STEPS as f64;
                let at_or_below = |rate: fn(&Bucket) -> f64, peak: f64| {
                    report
                        .buckets
                        .iter()
                        .filter(|b| peak <= 0.0 || rate(b) / peak <= fraction + 1e-12)
                        .map(|b| b.covered_s)
                        .sum::<f64>()
                        / total_covered
                        + 0.0 // an empty sum is -0.0
                };
                report.cdf.push(CdfPoint {
                    fraction_of_peak: fraction,
                    time_fraction_bytes: at_or_below(|b| b.bytes_per_s, peak_bytes),
                    time_fraction_requests: at_or_below(|b| b.iops, peak_iops),
                });
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use crate::record::VolumeId;
    use cordillera_types::Op;

    #[test]
    fn hours_days_and_the_time_at_fraction_of_peak() {
        // Starts at 22:00 UTC; 4 hours: 10, 30, 20, 40 requests of 1000 bytes, evenly spread.
        let origin = 22 * NS_PER_HOUR;
        let info = TraceInfo {
            format: Format::Msr,
            origin_unix_ns: Some(origin),
            has_time: true,
            last_line_unterminated: false,
        };
        let mut builder = ProfileBuilder::new(NS_PER_HOUR, 0).unwrap();
        for (hour, count) in [10i64, 30, 20, 40].into_iter().enumerate() {
            for i in 0..count {
                let time_ns = hour as i64 * NS_PER_HOUR + i * (NS_PER_HOUR / count);
                builder.add(
                    &Record {
                        time_ns,
                        volume: VolumeId(0),
                        op: Op::Read,
                        offset_bytes: 0,
                        length_bytes: 1000,
                        response_ns: None,
                    },
                    &info,
                );
            }
        }
        // One last record exactly at the end, so the fourth hour is fully covered.
        builder.add(
            &Record {
                time_ns: 4 * NS_PER_HOUR,
                volume: VolumeId(0),
                op: Op::Write,
                offset_bytes: 0,
                length_bytes: 0,
                response_ns: None,
            },
            &info,
        );
        let report = builder.finish(&info).unwrap();
        let hours: Vec<u32> = report.buckets.iter().map(|b| b.hour_of_day).collect();
        assert_eq!(hours, vec![22, 23, 0, 1, 2]);
        let days: Vec<(i64, u64)> = report.days.iter().map(|d| (d.day, d.requests)).collect();
        assert_eq!(days, vec![(0, 40), (1, 61)]);
        assert_eq!(report.buckets[3].utilization, 1.0);
        assert!((report.buckets[0].utilization - 0.25).abs() < 1e-12);
        assert_eq!(report.buckets[0].iops, 10.0 / 3600.0);
        // Four full hours at 0.25, 0.75, 0.5 and 1 of peak (the fifth bucket covers no time).
        let at = |f: f64| {
            report
                .cdf
                .iter()
                .find(|p| (p.fraction_of_peak - f).abs() < 1e-9)
                .unwrap()
                .time_fraction_bytes
        };
        assert_eq!(at(0.2), 0.0);
        assert_eq!(at(0.25), 0.25);
        assert_eq!(at(0.5), 0.5);
        assert_eq!(at(0.75), 0.75);
        assert_eq!(at(1.0), 1.0);
        assert!((report.peak_to_mean_bytes.unwrap() - 40.0 / 25.0).abs() < 1e-9);
        let midnight = report.hours_of_day.iter().find(|h| h.hour == 0).unwrap();
        assert_eq!(midnight.normalized, 0.5);
    }
}
