//! The gear scheduler (§3.4, §4.1): gears from loads, the hour-of-day predictor, daily plans
//! with the gear groups' order rotated across days, and the prediction's error (Figure 8).
//!
//! - Gear for a load L (in servers): g = ⌈(L/N)·r⌉, clamped to [g_min, r]; hours in the
//!   maintenance window run in gear r (§4.3: "We do keep the maintenance period in the highest
//!   gear").
//! - Prediction for hour h of the next day: the mean of hour h over the previous days.
//! - Plan for day d: the gear of each hour and the order of the gear groups; the first r − g
//!   groups of the order are powered down. The order rotates by one group a day, so over r days
//!   every group spends the same time powered.
//! - Provisioning (§4.3): N = the largest hourly load outside the maintenance window, rounded up
//!   to a multiple of r.

use serde::Serialize;
use thiserror::Error;

use crate::load::HourLoad;

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ScheduleError {
    #[error("g_min = 0 would leave chunks with no replica on: every access would wait for a server to wake (§3.7); use 1 or more")]
    GearZero,
    #[error("g_min = {g_min} is above r = {replicas}")]
    GearAboveReplicas { g_min: usize, replicas: usize },
    #[error("{servers} servers cannot hold {replicas} replicas")]
    TooFewServers { servers: usize, replicas: usize },
    #[error("hour {hour} is not an hour of the day (0–23)")]
    Hour { hour: usize },
}

/// How gears are chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GearPolicy {
    /// N, chunk servers.
    pub servers: usize,
    /// r.
    pub replicas: usize,
    /// The lowest gear allowed (§3.7: 1 for power, 2 for availability).
    pub g_min: usize,
    /// Hours of day that run in gear r whatever their load.
    pub maintenance_hours: Vec<usize>,
}

impl GearPolicy {
    pub fn new(
        servers: usize,
        replicas: usize,
        g_min: usize,
        maintenance_hours: Vec<usize>,
    ) -> Result<GearPolicy, ScheduleError> {
        if g_min == 0 {
            return Err(ScheduleError::GearZero);
        }
        if g_min > replicas {
            return Err(ScheduleError::GearAboveReplicas { g_min, replicas });
        }
        if servers < replicas || replicas == 0 {
            return Err(ScheduleError::TooFewServers { servers, replicas });
        }
        if let Some(&hour) = maintenance_hours.iter().find(|&&h| h >= 24) {
            return Err(ScheduleError::Hour { hour });
        }
        Ok(GearPolicy {
            servers,
            replicas,
            g_min,
            maintenance_hours,
        })
    }

    /// The gear for `load` servers at `hour_of_day`.
    pub fn gear(&self, load: f64, hour_of_day: usize) -> usize {
        if self.maintenance_hours.contains(&hour_of_day) {
            return self.replicas;
        }
        let wanted = load / self.servers as f64 * self.replicas as f64;
        // A load of exactly k/r of the servers needs gear k, not k + 1 from rounding.
        let gear = (wanted - 1e-9).ceil().max(0.0) as usize;
        gear.clamp(self.g_min, self.replicas)
    }
}

/// N from the hours' peaks outside the maintenance window, rounded up to a multiple of r
/// (at least r).
pub fn provision(hours: &[HourLoad], maintenance_hours: &[usize], replicas: usize) -> usize {
    let peak = hours
        .iter()
        .filter(|h| !maintenance_hours.contains(&h.hour_of_day()))
        .map(|h| h.peak)
        .fold(0.0, f64::max);
    let servers = (peak / replicas as f64 - 1e-9).ceil().max(1.0) as usize * replicas;
    servers.max(replicas)
}

/// When the gear of the hour starting at `hour_start_ns` takes effect: on the hour, or for an
/// up-shift `lead_ns` before it. Waking a server from standby takes the power model's wake-up
/// delay and its primaries migrate back after that, so an up-shift made on the hour leaves the
/// hour's first seconds to the servers of the lower gear. A down-shift waits for the hour.
pub fn shift_at(hour_start_ns: u64, from_gear: usize, to_gear: usize, lead_ns: u64) -> u64 {
    if to_gear > from_gear {
        hour_start_ns.saturating_sub(lead_ns)
    } else {
        hour_start_ns
    }
}

/// The lead of an up-shift for a wake-up delay: three times it, so the woken servers have
/// heartbeated and taken their primaries back before the hour.
pub fn up_shift_lead_ns(wake_ns: u64) -> u64 {
    wake_ns.saturating_mul(3)
}

/// The order of gear groups on `day`: rotated by one a day. The first r − g are powered down.
pub fn rotation(day: i64, replicas: usize) -> Vec<usize> {
    let shift = day.rem_euclid(replicas as i64) as usize;
    (0..replicas).map(|i| (i + shift) % replicas).collect()
}

/// A day's schedule, pushed to the servers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DayPlan {
    pub day: i64,
    pub gears: [usize; 24],
    /// Gear groups in power-down order.
    pub rotation: Vec<usize>,
}

impl DayPlan {
    /// Whether gear group `group` is powered at `hour_of_day`.
    pub fn powered(&self, group: usize, hour_of_day: usize) -> bool {
        let off = self.rotation.len() - self.gears[hour_of_day];
        !self.rotation[..off].contains(&group)
    }
}

/// Hour-of-day means over the days learned so far.
#[derive(Clone, Debug, Default)]
pub struct HourOfDayPredictor {
    sums: [f64; 24],
    counts: [u32; 24],
}

impl HourOfDayPredictor {
    /// Learns one day's loads (hours the trace did not cover are `None`).
    pub fn learn(&mut self, day: &[Option<f64>; 24]) {
        for (h, load) in day.iter().enumerate() {
            if let Some(load) = load {
                self.sums[h] += load;
                self.counts[h] += 1;
            }
        }
    }

    /// The predicted load of hour `h`, if any day covered it.
    pub fn predict(&self, h: usize) -> Option<f64> {
        (self.counts[h] > 0).then(|| self.sums[h] / self.counts[h] as f64)
    }

    /// Tomorrow's plan: each hour's predicted load as a gear (gear r where nothing was learned).
    pub fn plan(&self, day: i64, policy: &GearPolicy) -> DayPlan {
        let mut gears = [policy.replicas; 24];
        for (h, gear) in gears.iter_mut().enumerate() {
            if let Some(load) = self.predict(h) {
                *gear = policy.gear(load, h);
            }
        }
        DayPlan {
            day,
            gears,
            rotation: rotation(day, policy.replicas),
        }
    }
}

/// Which hourly figure a day's loads are made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HourMetric {
    /// The peak per-second L (§3.4's default).
    Peak,
    /// The mean per-second L.
    Mean,
    /// Bytes transferred (§4.1: all the load traces have).
    Bytes,
}

/// The hours grouped into whole days (hour 0 to 23), each hour's figure by `metric`; hours the
/// trace covered for less than `coverage_min` of the hour are `None`.
pub fn days(
    hours: &[HourLoad],
    metric: HourMetric,
    coverage_min: f64,
) -> Vec<(i64, [Option<f64>; 24])> {
    let mut days: Vec<(i64, [Option<f64>; 24])> = Vec::new();
    for hour in hours {
        let day = hour.day();
        if days.last().map(|(d, _)| *d) != Some(day) {
            days.push((day, [None; 24]));
        }
        if (hour.covered_s as f64) < coverage_min * 3600.0 {
            continue;
        }
        let value = match metric {
            HourMetric::Peak => hour.peak,
            HourMetric::Mean => hour.mean,
            HourMetric::Bytes => hour.bytes as f64 / hour.covered_s as f64,
        };
        days.last_mut().expect("a day").1[hour.hour_of_day()] = Some(value);
    }
    days
}

/// How well training on the first days predicts the rest (Figure 8 and §4.1's gear accuracy).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PredictionReport {
    pub training_days: usize,
    pub test_days: usize,
    /// Root-mean-square error of the hourly prediction over the test days, over the mean load
    /// of the test days.
    pub rms_error_normalized: f64,
    /// Test hours whose predicted gear equals the gear of the actual load.
    pub gears_correct: usize,
    pub test_hours: usize,
}

impl PredictionReport {
    pub fn gears_correct_fraction(&self) -> f64 {
        self.gears_correct as f64 / self.test_hours.max(1) as f64
    }
}

/// Trains on the first `training_days` of `days` and tests on the rest: every test hour with an
/// actual load and a prediction counts. `policy` turns loads into gears (for normalised loads,
/// N = the peak load).
pub fn evaluate_prediction(
    days: &[(i64, [Option<f64>; 24])],
    training_days: usize,
    policy: &GearPolicy,
) -> PredictionReport {
    let mut predictor = HourOfDayPredictor::default();
    for (_, day) in days.iter().take(training_days) {
        predictor.learn(day);
    }
    let mut squared = 0.0;
    let mut sum = 0.0;
    let mut hours = 0usize;
    let mut correct = 0usize;
    for (_, day) in days.iter().skip(training_days) {
        for (h, actual) in day.iter().enumerate() {
            let (Some(actual), Some(predicted)) = (actual, predictor.predict(h)) else {
                continue;
            };
            squared += (predicted - actual).powi(2);
            sum += actual;
            hours += 1;
            if policy.gear(predicted, h) == policy.gear(*actual, h) {
                correct += 1;
            }
        }
    }
    let mean = sum / hours.max(1) as f64;
    let rms = (squared / hours.max(1) as f64).sqrt();
    PredictionReport {
        training_days,
        test_days: days.len().saturating_sub(training_days),
        rms_error_normalized: if mean > 0.0 { rms / mean } else { 0.0 },
        gears_correct: correct,
        test_hours: hours,
    }
}

/// The mean fraction of servers that must stay on when each hour runs in the gear its actual
/// load needs (Figure 9's "oracle"): the mean of g/r.
pub fn oracle_fraction_on(hours: &[HourLoad], metric: HourMetric, policy: &GearPolicy) -> f64 {
    let mut sum = 0.0;
    let mut count = 0usize;
    for (_, day) in days(hours, metric, 0.0) {
        for (h, load) in day.iter().enumerate() {
            if let Some(load) = load {
                sum += policy.gear(*load, h) as f64 / policy.replicas as f64;
                count += 1;
            }
        }
    }
    sum / count.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_shifts_happen_ahead_of_the_hour_and_down_shifts_on_it() {
        let hour = 3_600_000_000_000u64;
        let lead = up_shift_lead_ns(10_000_000_000);
        assert_eq!(lead, 30_000_000_000);
        assert_eq!(shift_at(hour, 1, 3, lead), hour - lead);
        assert_eq!(shift_at(hour, 3, 2, lead), hour);
        assert_eq!(shift_at(hour, 2, 2, lead), hour);
        assert_eq!(shift_at(10, 1, 2, lead), 0);
    }

    #[test]
    fn gears_follow_the_load_between_g_min_and_r() {
        let policy = GearPolicy::new(15, 3, 1, vec![1]).unwrap();
        assert_eq!(policy.gear(0.0, 5), 1);
        assert_eq!(policy.gear(5.0, 5), 1, "exactly a third of the servers");
        assert_eq!(policy.gear(5.01, 5), 2);
        assert_eq!(policy.gear(10.0, 5), 2);
        assert_eq!(policy.gear(14.0, 5), 3);
        assert_eq!(policy.gear(40.0, 5), 3, "above N: still r");
        assert_eq!(
            policy.gear(0.0, 1),
            3,
            "the maintenance hour runs in the top gear"
        );
        let high = GearPolicy::new(15, 3, 2, vec![]).unwrap();
        assert_eq!(high.gear(0.0, 5), 2);
        assert_eq!(
            GearPolicy::new(15, 3, 0, vec![]),
            Err(ScheduleError::GearZero)
        );
        assert!(GearPolicy::new(15, 3, 4, vec![]).is_err());
        assert!(GearPolicy::new(15, 3, 1, vec![24]).is_err());
        assert!(GearPolicy::new(2, 3, 1, vec![]).is_err());
    }

    #[test]
    fn every_group_is_powered_equally_over_r_days() {
        let policy = GearPolicy::new(15, 3, 1, vec![]).unwrap();
        let mut predictor = HourOfDayPredictor::default();
        let mut day = [Some(1.0); 24];
        day[12] = Some(9.0);
        predictor.learn(&day);
        let mut powered_hours = [0usize; 3];
        for d in 0..3 {
            let plan = predictor.plan(d, &policy);
            assert_eq!(plan.gears[0], 1);
            assert_eq!(plan.gears[12], 2);
            for (group, hours) in powered_hours.iter_mut().enumerate() {
                *hours += (0..24).filter(|&h| plan.powered(group, h)).count();
            }
        }
        assert_eq!(powered_hours, [25, 25, 25]);
    }

    #[test]
    fn a_repeating_day_is_predicted_exactly() {
        let policy = GearPolicy::new(3, 3, 1, vec![]).unwrap();
        let shape: [Option<f64>; 24] = std::array::from_fn(|h| Some(1.0 + (h % 6) as f64 / 3.0));
        let days: Vec<(i64, [Option<f64>; 24])> = (0..7).map(|d| (d, shape)).collect();
        let report = evaluate_prediction(&days, 6, &policy);
        assert_eq!(report.test_hours, 24);
        assert_eq!(report.gears_correct, 24);
        assert!(report.rms_error_normalized < 1e-12);
        let mut noisy = days.clone();
        noisy[6].1[3] = Some(0.1);
        let report = evaluate_prediction(&noisy, 6, &policy);
        assert_eq!(report.gears_correct, 23);
        assert!(report.rms_error_normalized > 0.0);
    }
}
