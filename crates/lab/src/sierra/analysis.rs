//! Sierra §2 and §4.1, and the gear schedule of §4.4: the load of a trace hour by hour
//! (Figures 1–2), how well the hour-of-day predictor does after n days of training (Figure 8),
//! the fraction of servers that must stay on with oracle gears (Figure 9, left), and for a
//! two-day I/O trace the load metric L, the provisioning and the gears chosen (Figure 10) with
//! the power they imply.

use serde::Serialize;

use cordillera_gears::load::{HourLoad, LoadMeter, ServerPerformance};
use cordillera_gears::schedule::{
    days, evaluate_prediction, oracle_fraction_on, provision, GearPolicy, HourMetric,
    PredictionReport,
};
use cordillera_models::power::PowerParams;
use cordillera_trace::RecordReader;
use cordillera_types::units::{NS_PER_DAY, NS_PER_S};

/// Hours covered for less than this share are left out of day-by-day figures.
pub const HOUR_COVERAGE_MIN: f64 = 0.5;

/// The hourly load of a trace.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    pub name: String,
    pub records: u64,
    pub hours: Vec<HourLoad>,
    /// Hours of day run in the top gear and left out of provisioning and normalisation.
    pub maintenance_hours: Vec<usize>,
    /// Where the trace starts after its first midnight (local time), ns.
    pub day_offset_ns: i64,
    /// Each volume's extent: the end of its furthest request.
    pub volume_bytes: Vec<u64>,
}

/// Reads `reader` to its end and measures L every second. `utc_offset_hours` moves the wall
/// clock to the service's local time (hours of day); traces without a clock start at midnight.
pub fn measure(
    name: &str,
    reader: &mut dyn RecordReader,
    server: ServerPerformance,
    replicas: usize,
    utc_offset_hours: i64,
    maintenance_hours: Vec<usize>,
    progress: &mut dyn FnMut(&str),
) -> Result<Measured, String> {
    let mut meter: Option<LoadMeter> = None;
    let mut records = 0u64;
    let mut day_offset_ns = 0;
    let mut volume_bytes: Vec<u64> = Vec::new();
    while let Some(record) = reader.next_record().map_err(|e| e.to_string())? {
        let meter = meter.get_or_insert_with(|| {
            let start_ns = reader
                .info()
                .origin_unix_ns
                .map(|o| (o + utc_offset_hours * 3_600 * NS_PER_S).rem_euclid(NS_PER_DAY))
                .unwrap_or(0);
            day_offset_ns = start_ns;
            LoadMeter::new(server, replicas, start_ns)
        });
        meter.add(&record);
        let v = record.volume.index();
        if volume_bytes.len() <= v {
            volume_bytes.resize(v + 1, 0);
        }
        volume_bytes[v] =
            volume_bytes[v].max(record.offset_bytes.saturating_add(record.length_bytes));
        records += 1;
        if records.is_multiple_of(20_000_000) {
            progress(&format!("{name}: {} M records", records / 1_000_000));
        }
    }
    let hours = meter.map(LoadMeter::finish).unwrap_or_default();
    Ok(Measured {
        name: name.to_owned(),
        records,
        hours,
        maintenance_hours,
        day_offset_ns,
        volume_bytes,
    })
}

/// One hour of Figure 1: bytes per second over the busiest hour's (maintenance excluded).
#[derive(Clone, Debug, Serialize)]
pub struct NormalizedHour {
    pub hour: i64,
    pub hour_of_day: usize,
    pub normalized: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CdfPoint {
    pub utilization: f64,
    /// Fraction of hours at or below `utilization` of the peak.
    pub fraction_of_time: f64,
}

/// §2 and §4.1 for one trace of about a week.
#[derive(Clone, Debug, Serialize)]
pub struct LoadTraceReport {
    pub name: String,
    pub records: u64,
    pub whole_days: usize,
    /// Figure 1.
    pub load: Vec<NormalizedHour>,
    /// Figure 2.
    pub utilization_cdf: Vec<CdfPoint>,
    /// Figure 8: training on the first n days, testing on the rest.
    pub prediction: Vec<PredictionReport>,
    /// Figure 9 (left): mean fraction of servers on with oracle gears, per g_min.
    pub oracle_fraction_on: Vec<(usize, f64)>,
    /// The hour-of-day predictor against baselines on the whole days (the first g_min).
    pub predictors: Option<super::predictors::WorkloadScores>,
}

/// Figures 1, 2, 8 and 9 (left) from hourly bytes, §4.1's metric ("mean bytes transferred per
/// hour, since that is all we have available from this data"). Loads are normalised to the
/// busiest hour outside the maintenance window, so the cluster is optimally provisioned (N = that
/// peak).
pub fn load_trace_report(
    measured: &Measured,
    replicas: usize,
    g_mins: &[usize],
) -> Result<LoadTraceReport, String> {
    let covered: Vec<&HourLoad> = measured
        .hours
        .iter()
        .filter(|h| h.covered_s as f64 >= HOUR_COVERAGE_MIN * 3600.0)
        .collect();
    let rate = |h: &HourLoad| h.bytes as f64 / h.covered_s as f64;
    let peak = covered
        .iter()
        .filter(|h| !measured.maintenance_hours.contains(&h.hour_of_day()))
        .map(|h| rate(h))
        .fold(0.0, f64::max);
    if peak <= 0.0 {
        return Err(format!("{}: no I/O in any hour", measured.name));
    }
    let load: Vec<NormalizedHour> = covered
        .iter()
        .map(|h| NormalizedHour {
            hour: h.hour,
            hour_of_day: h.hour_of_day(),
            normalized: rate(h) / peak,
        })
        .collect();
    let mut sorted: Vec<f64> = load.iter().map(|h| h.normalized).collect();
    sorted.sort_by(f64::total_cmp);
    let utilization_cdf = (0..=20)
        .map(|i| {
            let u = i as f64 / 20.0;
            let below = sorted.partition_point(|&x| x <= u + 1e-12);
            CdfPoint {
                utilization: u,
                fraction_of_time: below as f64 / sorted.len() as f64,
            }
        })
        .collect();
    // Loads in units of the peak's 1/r, so that N = r servers is exactly the peak.
    let scaled: Vec<HourLoad> = measured
        .hours
        .iter()
        .map(|h| {
            let mut scaled = *h;
            scaled.peak = rate(h) / peak * replicas as f64;
            scaled
        })
        .collect();
    let policy = |g_min| {
        GearPolicy::new(
            replicas,
            replicas,
            g_min,
            measured.maintenance_hours.clone(),
        )
        .map_err(|e| e.to_string())
    };
    let by_day = days(&scaled, HourMetric::Peak, HOUR_COVERAGE_MIN);
    let whole_days = by_day
        .iter()
        .filter(|(_, d)| d.iter().all(Option::is_some))
        .count();
    // Train only on whole days, test on whole days: drop partial first and last days.
    let whole: Vec<(i64, [Option<f64>; 24])> = by_day
        .into_iter()
        .filter(|(_, d)| d.iter().all(Option::is_some))
        .collect();
    let first_policy = policy(*g_mins.first().unwrap_or(&1))?;
    let predictors = super::predictors::score(
        &measured.name,
        &whole,
        replicas,
        *g_mins.first().unwrap_or(&1),
        &measured.maintenance_hours,
    )
    .ok();
    let prediction = (1..whole.len())
        .map(|n| evaluate_prediction(&whole, n, &first_policy))
        .collect();
    let mut oracle = Vec::new();
    for &g_min in g_mins {
        let covered_scaled: Vec<HourLoad> = scaled
            .iter()
            .filter(|h| h.covered_s as f64 >= HOUR_COVERAGE_MIN * 3600.0)
            .copied()
            .collect();
        oracle.push((
            g_min,
            oracle_fraction_on(&covered_scaled, HourMetric::Peak, &policy(g_min)?),
        ));
    }
    Ok(LoadTraceReport {
        name: measured.name.clone(),
        records: measured.records,
        whole_days,
        load,
        utilization_cdf,
        prediction,
        oracle_fraction_on: oracle,
        predictors,
    })
}

/// One hour of Figure 10.
#[derive(Clone, Debug, Serialize)]
pub struct ScheduledHour {
    pub hour: i64,
    pub hour_of_day: usize,
    /// The hour's peak per-second L, and its mean.
    pub peak_servers: f64,
    pub mean_servers: f64,
    /// The oracle gear for each g_min (in the order of `g_mins`).
    pub gears: Vec<usize>,
}

/// Power of one configuration over the run, from the schedule.
#[derive(Clone, Debug, Serialize)]
pub struct PowerEstimate {
    pub g_min: usize,
    /// Mean fraction of chunk servers powered.
    pub chunk_servers_on: f64,
    /// Energy over the baseline's: chunk servers and loggers against the baseline of the same
    /// number of servers, and chunk servers alone against as many chunk servers always on.
    pub with_loggers_over_baseline: f64,
    pub chunk_servers_over_baseline: f64,
    pub hours_in_top_gear: usize,
    pub gear_changes: usize,
}

/// Figure 10 and Figure 9 (right) for a trace of a day or more.
#[derive(Clone, Debug, Serialize)]
pub struct ScheduleReport {
    pub name: String,
    pub records: u64,
    pub server: ServerPerformance,
    /// N: the largest hourly peak outside maintenance, rounded up to a multiple of r.
    pub chunk_servers: usize,
    pub loggers: usize,
    pub peak_servers_max: f64,
    pub peak_servers_max_maintenance: f64,
    pub g_mins: Vec<usize>,
    pub hours: Vec<ScheduledHour>,
    pub power: Vec<PowerEstimate>,
    /// The first g_min's savings with the idle and standby powers varied.
    pub sensitivity: Vec<SensitivityRow>,
}

/// The provisioning, oracle gears and power for a measured trace. Power (an estimate from the
/// schedule, not a simulation): a powered server draws `idle_w` plus `(active_w − idle_w)` × its
/// utilization (the hour's mean L over the servers on), a server in standby `standby_w`, each
/// wake-up `wake_from_standby_ns` at `active_w`; loggers are powered and idle throughout; the
/// baseline runs N + loggers chunk servers, always on, sharing the load.
pub fn schedule_report(
    measured: &Measured,
    replicas: usize,
    loggers: usize,
    g_mins: &[usize],
    power: &PowerParams,
    server: ServerPerformance,
) -> Result<ScheduleReport, String> {
    let hours: Vec<HourLoad> = measured.hours.clone();
    let n = provision(&hours, &measured.maintenance_hours, replicas);
    let policies = g_mins
        .iter()
        .map(|&g| GearPolicy::new(n, replicas, g, measured.maintenance_hours.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let scheduled: Vec<ScheduledHour> = hours
        .iter()
        .map(|h| ScheduledHour {
            hour: h.hour,
            hour_of_day: h.hour_of_day(),
            peak_servers: h.peak,
            mean_servers: h.mean,
            gears: policies
                .iter()
                .map(|p| p.gear(h.peak, h.hour_of_day()))
                .collect(),
        })
        .collect();
    let estimates: Vec<PowerEstimate> = g_mins
        .iter()
        .enumerate()
        .map(|(i, &g_min)| {
            let gears: Vec<usize> = scheduled.iter().map(|s| s.gears[i]).collect();
            energy(&hours, &gears, n, replicas, loggers, power, g_min)
        })
        .collect();
    // How the savings move with the power model's figures (the paper gives no wattages).
    let first_gears: Vec<usize> = scheduled.iter().map(|s| s.gears[0]).collect();
    let mut sensitivity = Vec::new();
    for idle_w in SENSITIVITY_IDLE_W {
        for standby_w in SENSITIVITY_STANDBY_W {
            let p = PowerParams {
                idle_w,
                standby_w,
                ..*power
            };
            let e = energy(&hours, &first_gears, n, replicas, loggers, &p, g_mins[0]);
            sensitivity.push(SensitivityRow {
                active_w: p.active_w,
                idle_w,
                standby_w,
                saved_with_loggers: 1.0 - e.with_loggers_over_baseline,
                saved_chunk_servers: 1.0 - e.chunk_servers_over_baseline,
            });
        }
    }
    let is_maintenance = |h: &HourLoad| measured.maintenance_hours.contains(&h.hour_of_day());
    Ok(ScheduleReport {
        name: measured.name.clone(),
        records: measured.records,
        server,
        chunk_servers: n,
        loggers,
        peak_servers_max: hours
            .iter()
            .filter(|h| !is_maintenance(h))
            .map(|h| h.peak)
            .fold(0.0, f64::max),
        peak_servers_max_maintenance: hours
            .iter()
            .filter(|h| is_maintenance(h))
            .map(|h| h.peak)
            .fold(0.0, f64::max),
        g_mins: g_mins.to_vec(),
        hours: scheduled,
        power: estimates,
        sensitivity,
    })
}

/// Idle and standby powers the sensitivity table varies (active stays the model's).
pub const SENSITIVITY_IDLE_W: [f64; 4] = [100.0, 125.0, 150.0, 175.0];
pub const SENSITIVITY_STANDBY_W: [f64; 3] = [2.0, 10.0, 25.0];

/// One row of the sensitivity table (the first g_min).
#[derive(Clone, Debug, Serialize)]
pub struct SensitivityRow {
    pub active_w: f64,
    pub idle_w: f64,
    pub standby_w: f64,
    pub saved_with_loggers: f64,
    pub saved_chunk_servers: f64,
}

/// The energy of running `hours` in `gears` (one per hour) on N = `n` chunk servers and
/// `loggers` loggers, against the baselines (see [`schedule_report`]).
fn energy(
    hours: &[HourLoad],
    gears: &[usize],
    n: usize,
    replicas: usize,
    loggers: usize,
    power: &PowerParams,
    g_min: usize,
) -> PowerEstimate {
    let mut sierra_chunk_j = 0.0;
    let mut baseline_chunk_j = 0.0;
    let mut on_sum = 0.0;
    let mut covered = 0.0;
    let mut previous = replicas;
    let mut changes = 0;
    let mut top = 0;
    for (h, &gear) in hours.iter().zip(gears) {
        let seconds = h.covered_s as f64;
        let on = (n * gear / replicas) as f64;
        let off = n as f64 - on;
        let u = (h.mean / on).min(1.0);
        sierra_chunk_j += seconds
            * (on * (power.idle_w + (power.active_w - power.idle_w) * u) + off * power.standby_w);
        if gear > previous {
            let woken = (n * (gear - previous) / replicas) as f64;
            sierra_chunk_j +=
                woken * (power.active_w - power.standby_w) * power.wake_from_standby_ns as f64
                    / 1e9;
        }
        if gear != previous {
            changes += 1;
        }
        previous = gear;
        if gear == replicas {
            top += 1;
        }
        let base_u = (h.mean / n as f64).min(1.0);
        baseline_chunk_j +=
            seconds * n as f64 * (power.idle_w + (power.active_w - power.idle_w) * base_u);
        on_sum += seconds * on / n as f64;
        covered += seconds;
    }
    let loggers_j = covered * loggers as f64 * power.idle_w;
    // The baseline's extra servers are chunk servers sharing the load.
    let total = (n + loggers) as f64;
    let baseline_all_j: f64 = hours
        .iter()
        .map(|h| {
            let u = (h.mean / total).min(1.0);
            h.covered_s as f64 * total * (power.idle_w + (power.active_w - power.idle_w) * u)
        })
        .sum();
    PowerEstimate {
        g_min,
        chunk_servers_on: on_sum / covered.max(1.0),
        with_loggers_over_baseline: (sierra_chunk_j + loggers_j) / baseline_all_j,
        chunk_servers_over_baseline: sierra_chunk_j / baseline_chunk_j,
        hours_in_top_gear: top,
        gear_changes: changes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sensitivity_table_contains_the_model_and_moves_the_right_way() {
        // Two days: busy afternoons (L = 12 servers), quiet otherwise (L = 2).
        let hours: Vec<HourLoad> = (0..48)
            .map(|h| {
                let busy = (12..18).contains(&(h % 24));
                let l = if busy { 12.0 } else { 2.0 };
                HourLoad {
                    hour: h,
                    peak: l,
                    mean: 0.8 * l,
                    covered_s: 3600,
                    ..HourLoad::default()
                }
            })
            .collect();
        let measured = Measured {
            name: "two days".into(),
            records: 1,
            hours,
            maintenance_hours: vec![],
            day_offset_ns: 0,
            volume_bytes: vec![],
        };
        let power = PowerParams::default();
        let r = schedule_report(
            &measured,
            3,
            3,
            &[1, 2],
            &power,
            ServerPerformance::sierra_table4(),
        )
        .unwrap();
        let model = r
            .sensitivity
            .iter()
            .find(|s| s.idle_w == power.idle_w && s.standby_w == power.standby_w)
            .unwrap();
        let p = &r.power[0];
        assert!((model.saved_with_loggers - (1.0 - p.with_loggers_over_baseline)).abs() < 1e-12);
        assert!((model.saved_chunk_servers - (1.0 - p.chunk_servers_over_baseline)).abs() < 1e-12);
        // More idle power: more saved by switching off; more standby power: less.
        let at = |idle: f64, standby: f64| {
            r.sensitivity
                .iter()
                .find(|s| s.idle_w == idle && s.standby_w == standby)
                .unwrap()
                .saved_chunk_servers
        };
        assert!(at(175.0, 10.0) > at(100.0, 10.0));
        assert!(at(150.0, 2.0) > at(150.0, 25.0));
        assert_eq!(r.sensitivity.len(), 12);
    }
}
