//! A built-in synthetic trace, so every command has something to run on without data: several
//! volumes with a diurnal load, short unpredictable write-heavy peaks on one volume at a time
//! (the load shape Everest answers), a hot working set reaccessed within the hour and a nightly
//! job that rereads the same region every day (Bonfire's hourly and daily classes).
//!
//! Deterministic for a seed. The simulator's calibrated generators (ON-OFF, Zipf, diurnal) will
//! supersede this one; this one exists to exercise the characterization end to end.

use cordillera_types::units::{GIB, MIB, NS_PER_S};
use cordillera_types::Op;

use crate::format::Format;
use crate::record::{Record, TraceInfo, VolumeId, VolumeTable};

#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub volumes: u32,
    pub duration_s: u64,
    /// Mean requests per second per volume outside peaks, at the diurnal maximum.
    pub base_rate_per_s: f64,
    /// Peak episodes over the whole trace, each on one volume.
    pub peaks: u32,
    /// Rate multiplier during a peak.
    pub peak_factor: f64,
    pub peak_duration_s: u64,
    /// In a peak, each second's requests arrive within its first this many milliseconds (a
    /// burst, as a database's checkpoint writes); 1000: spread over the second.
    pub peak_burst_ms: u64,
    pub seed: u64,
}

impl Default for SynthOptions {
    fn default() -> SynthOptions {
        SynthOptions {
            volumes: 4,
            duration_s: 2 * 24 * 3600,
            base_rate_per_s: 3.0,
            peaks: 3,
            peak_factor: 25.0,
            peak_duration_s: 600,
            peak_burst_ms: 1000,
            seed: 1,
        }
    }
}

/// The wall-clock start of synthetic traces: 2007-02-22 17:00 UTC, the start of the MSR
/// Cambridge traces.
pub const SYNTH_ORIGIN_UNIX_NS: i64 = 1_172_163_600 * NS_PER_S;

const VOLUME_BYTES: u64 = 64 * GIB;
const HOT_BYTES: u64 = 512 * MIB;
const NIGHTLY_BYTES: u64 = 2 * GIB;
const NIGHTLY_OFFSET_BYTES: u64 = 8 * GIB;
const NIGHTLY_HOUR: u64 = 2;
const NIGHTLY_RATE_PER_S: f64 = 4.0;

/// Generates the trace in memory, in time order.
pub fn generate(options: &SynthOptions) -> (TraceInfo, VolumeTable, Vec<Record>) {
    let mut rng = SplitMix64(options.seed);
    let mut volumes = VolumeTable::new();
    for v in 0..options.volumes {
        volumes
            .intern(format!("synth_{v}").as_bytes())
            .expect("few volumes");
    }
    let peaks: Vec<(u64, u32)> = (0..options.peaks)
        .map(|_| {
            let start = rng.below(
                options
                    .duration_s
                    .saturating_sub(options.peak_duration_s)
                    .max(1),
            );
            (start, rng.below(options.volumes.max(1) as u64) as u32)
        })
        .collect();
    let mut records = Vec::new();
    let mut second_records = Vec::new();
    for second in 0..options.duration_s {
        let hour = ((SYNTH_ORIGIN_UNIX_NS / NS_PER_S) as u64 + second) / 3600 % 24;
        // Diurnal: lowest at 04:00, highest at 16:00.
        let diurnal =
            0.15 + 0.85 * (0.5 - 0.5 * (std::f64::consts::TAU * (hour as f64 - 4.0) / 24.0).cos());
        second_records.clear();
        for v in 0..options.volumes {
            let in_peak = peaks.iter().any(|(start, pv)| {
                *pv == v && (*start..start + options.peak_duration_s).contains(&second)
            });
            let rate =
                options.base_rate_per_s * diurnal * if in_peak { options.peak_factor } else { 1.0 };
            let spread_ns = if in_peak {
                (options.peak_burst_ms.clamp(1, 1000) * 1_000_000) as i64
            } else {
                NS_PER_S
            };
            for _ in 0..rng.poisson(rate) {
                let time_ns = second as i64 * NS_PER_S + rng.below(spread_ns as u64) as i64;
                let (op, offset, size) = if in_peak {
                    let op = if rng.unit() < 0.75 {
                        Op::Write
                    } else {
                        Op::Read
                    };
                    (op, 4096 * rng.below(VOLUME_BYTES / 4096), 8192)
                } else if rng.unit() < 0.7 {
                    // Hot set, skewed towards its start.
                    let u = rng.unit();
                    let op = if rng.unit() < 0.6 {
                        Op::Read
                    } else {
                        Op::Write
                    };
                    (
                        op,
                        4096 * ((u * u * (HOT_BYTES / 4096) as f64) as u64),
                        4096,
                    )
                } else {
                    let op = if rng.unit() < 0.5 {
                        Op::Read
                    } else {
                        Op::Write
                    };
                    (
                        op,
                        4096 * rng.below(VOLUME_BYTES / 4096),
                        4096 * (1 + rng.below(16)),
                    )
                };
                second_records.push(Record {
                    time_ns,
                    volume: VolumeId(v),
                    op,
                    offset_bytes: offset,
                    length_bytes: size,
                    response_ns: None,
                });
            }
        }
        if hour == NIGHTLY_HOUR && options.volumes > 0 {
            // The nightly job on the first volume reads the same region at the same time every
            // day: reaccesses 24 h apart (Bonfire's daily class).
            let position = (second % 3600) * (NIGHTLY_BYTES / 3600) / 65_536 * 65_536;
            for _ in 0..rng.poisson(NIGHTLY_RATE_PER_S) {
                let time_ns = second as i64 * NS_PER_S + rng.below(NS_PER_S as u64) as i64;
                second_records.push(Record {
                    time_ns,
                    volume: VolumeId(0),
                    op: Op::Read,
                    offset_bytes: NIGHTLY_OFFSET_BYTES + position,
                    length_bytes: 65_536,
                    response_ns: None,
                });
            }
        }
        second_records.sort_by_key(|r| r.time_ns);
        records.extend_from_slice(&second_records);
    }
    let info = TraceInfo {
        format: Format::Binary,
        origin_unix_ns: Some(SYNTH_ORIGIN_UNIX_NS),
        has_time: true,
        last_line_unterminated: false,
    };
    (info, volumes, records)
}

pub use cordillera_types::rng::SplitMix64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_trace_and_time_ordered() {
        let options = SynthOptions {
            duration_s: 3 * 3600,
            ..SynthOptions::default()
        };
        let (_, volumes, a) = generate(&options);
        let (_, _, b) = generate(&options);
        assert_eq!(a, b);
        assert_eq!(volumes.len(), 4);
        assert!(a.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        let (_, _, c) = generate(&SynthOptions { seed: 2, ..options });
        assert_ne!(a, c);
    }

    #[test]
    fn poisson_mean_is_lambda() {
        let mut rng = SplitMix64(7);
        for lambda in [0.5, 3.0, 75.0] {
            let n = 20_000;
            let mean = (0..n).map(|_| rng.poisson(lambda)).sum::<u64>() as f64 / n as f64;
            assert!(
                (mean - lambda).abs() < 0.05 * lambda,
                "lambda {lambda}: mean {mean}"
            );
        }
    }
}
