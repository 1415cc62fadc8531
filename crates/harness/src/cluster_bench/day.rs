//! The bench's day: a generated day of `gen:hotmail-like` requests at the rate the method asks
//! for, each hour's measured load (L, per second of the replay) and the gear chosen for it.

use anyhow::{anyhow, Result};
use serde::Serialize;

use cordillera_gears::load::{HourLoad, LoadMeter, ServerPerformance};
use cordillera_gears::schedule::GearPolicy;
use cordillera_trace::{Record, RecordReader};

use super::ClusterBenchArgs;

/// How the bench figures gears and energy (`--method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    Paper,
    MeanLoad,
}

impl Method {
    pub(super) fn peak_load(self) -> f64 {
        match self {
            Method::Paper => 0.9,
            Method::MeanLoad => 0.6,
        }
    }

    pub(super) fn gear_utilization(self) -> f64 {
        match self {
            Method::Paper => 1.0,
            Method::MeanLoad => 0.75,
        }
    }

    /// Hours of the day in the top gear whatever their load (the generator's maintenance).
    pub(super) fn maintenance_hours(self) -> Vec<usize> {
        match self {
            Method::Paper => vec![0, 1],
            Method::MeanLoad => Vec::new(),
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Method::Paper => "the paper's method (each hour's busiest second, maintenance hours in gear 3, loggers measured)",
            Method::MeanLoad => "VARIANT mean-load (the hour's mean over 0.75, no maintenance hours, loggers at idle power)",
        }
    }
}

/// One hour of the day: its load and gear.
#[derive(Clone, Debug, Serialize)]
pub(super) struct HourPlan {
    pub(super) hour: usize,
    pub(super) requests: u64,
    /// L of the hour's busiest second of the replay, in chunk servers.
    pub(super) peak: f64,
    /// Mean L over the hour.
    pub(super) mean: f64,
    /// The load the gear was chosen for (`peak` or `mean`, by the method).
    pub(super) load: f64,
    pub(super) maintenance: bool,
    pub(super) gear: usize,
}

pub(super) struct Day {
    pub(super) records: Vec<Record>,
    pub(super) hours: Vec<HourPlan>,
    pub(super) rate_at_peak: f64,
    /// The paper's provisioning rule on this day: the busiest second outside the maintenance
    /// hours rounded up to a multiple of 3.
    pub(super) provisioned: usize,
}

pub(super) fn gears_text(hours: &[HourPlan]) -> String {
    hours
        .iter()
        .map(|h| h.gear.to_string())
        .collect::<Vec<_>>()
        .join("")
}

/// The day's requests and each hour's load and gear.
///
/// The load is measured per second of the replay (an interval of `speed` seconds of the
/// trace), against the servers' performance slowed `speed` times (the trace's time runs
/// `speed` times faster on the real servers). With `paper` the rate is set by a few
/// generations until the busiest second outside the maintenance hours is `peak_load` of the
/// servers (within 2 %); with `mean-load`, from the requests' mean cost at the peak hour.
pub(super) fn day(a: &ClusterBenchArgs, servers: usize, seed: u64) -> Result<Day> {
    let r = 3usize;
    let method = a.method;
    let peak_load = a.peak_load.unwrap_or(method.peak_load());
    let utilization = a.gear_utilization.unwrap_or(method.gear_utilization());
    let maintenance = method.maintenance_hours();
    let perf = ServerPerformance::sierra_table4();
    let speed = 3600.0 / a.hour_seconds as f64;
    // The load of one request per second (60 % reads, 3-way writes, all random).
    let per_request = 0.6 / perf.read_iops + 0.4 * r as f64 / perf.write_iops;
    let scaled = ServerPerformance {
        read_iops: perf.read_iops / speed,
        write_iops: perf.write_iops / speed,
        read_bytes_per_s: perf.read_bytes_per_s / speed,
        write_bytes_per_s: perf.write_bytes_per_s / speed,
    };
    let generate = |rate_at_peak: f64| -> Result<(Vec<Record>, Vec<HourLoad>)> {
        let spec = format!(
            "gen:hotmail-like:days=1,maintenance_hours={},peak_rate={},seed={seed}",
            maintenance.len(),
            rate_at_peak / speed
        );
        let mut reader =
            cordillera_sim::workload::open_spec(&spec).map_err(|e| anyhow!("{spec}: {e}"))?;
        let mut meter = LoadMeter::new(scaled, r, 0).with_interval((speed * 1e9) as i64);
        let mut records = Vec::new();
        while let Some(record) = reader.next_record()? {
            meter.add(&record);
            records.push(record);
        }
        Ok((records, meter.finish()))
    };
    let target = peak_load * servers as f64;
    let mut rate_at_peak = target / per_request;
    let (mut records, mut loads) = generate(rate_at_peak)?;
    if method == Method::Paper {
        for _ in 0..6 {
            let busiest = loads
                .iter()
                .filter(|l| !maintenance.contains(&l.hour_of_day()))
                .map(|l| l.peak)
                .fold(0.0, f64::max);
            if busiest <= 0.0 || (busiest / target - 1.0).abs() <= 0.02 {
                break;
            }
            rate_at_peak *= target / busiest;
            (records, loads) = generate(rate_at_peak)?;
        }
    }
    let policy =
        GearPolicy::new(servers, r, a.g_min, maintenance.clone()).map_err(|e| anyhow!("{e}"))?;
    let provisioned = cordillera_gears::schedule::provision(&loads, &maintenance, r);
    let hours = (0..24)
        .map(|h| {
            let l = loads.iter().find(|l| l.hour == h as i64);
            let (peak, mean) = l.map_or((0.0, 0.0), |l| (l.peak, l.mean));
            let load = match method {
                Method::Paper => peak,
                Method::MeanLoad => mean,
            };
            HourPlan {
                hour: h,
                requests: l.map_or(0, |l| l.requests),
                peak,
                mean,
                load,
                maintenance: maintenance.contains(&h),
                gear: policy.gear(load / utilization, h),
            }
        })
        .collect();
    Ok(Day {
        records,
        hours,
        rate_at_peak,
        provisioned,
    })
}
