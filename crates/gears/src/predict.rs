//! The gear scheduler's predictor judged against baselines (§4.1 judges it alone): for each day
//! of a test span, each predictor sees only the days before it, predicts every hour, and the
//! prediction becomes a gear. Scored on the same hours, by Figure 8's error (the RMS error over
//! the mean load of the test hours), the gear-hours right, the hours under-geared (fewer servers
//! on than the load needed: a performance cost) and over-geared, and the energy: the mean
//! fraction of servers on, beside the oracle's (the gears of the actual loads).
//!
//! - [`Predictor::HourOfDay`]: §3.4's, the mean of the hour over every earlier day.
//! - [`Predictor::Yesterday`]: the same hour of the day before.
//! - [`Predictor::LastWeek`]: the same hour seven days before (needs a week of history).
//! - [`Predictor::Oracle`]: the actual load (error 0; the energy floor).
//!
//! An hour a predictor cannot predict (no earlier day has it) runs in gear r, as the scheduler
//! runs it, and counts in the gear and energy figures but not in the error.

use serde::Serialize;

use crate::schedule::{GearPolicy, HourOfDayPredictor};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Predictor {
    HourOfDay,
    Yesterday,
    LastWeek,
    Oracle,
}

impl Predictor {
    pub const ALL: [Predictor; 4] = [
        Predictor::HourOfDay,
        Predictor::Yesterday,
        Predictor::LastWeek,
        Predictor::Oracle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Predictor::HourOfDay => "hour of day (§3.4)",
            Predictor::Yesterday => "yesterday",
            Predictor::LastWeek => "same hour last week",
            Predictor::Oracle => "oracle",
        }
    }
}

/// One predictor over the test days.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PredictorScore {
    pub predictor: Predictor,
    /// Test hours with an actual load.
    pub test_hours: usize,
    /// Of which predicted (the rest ran in gear r).
    pub predicted_hours: usize,
    /// RMS error over the predicted hours, over the mean actual load of the test hours.
    pub rms_error_normalized: f64,
    pub gears_correct: usize,
    /// Hours whose gear was below the one the actual load needed.
    pub hours_under_geared: usize,
    pub hours_over_geared: usize,
    /// Mean of gear / r over the test hours.
    pub fraction_on: f64,
}

/// Each predictor on the days from index `first_test` on (each day predicted from the days
/// before it; `days` in order, one entry per calendar day, hours without a load `None`).
pub fn compare(
    days: &[(i64, [Option<f64>; 24])],
    first_test: usize,
    policy: &GearPolicy,
) -> Vec<PredictorScore> {
    Predictor::ALL
        .iter()
        .map(|&p| score(p, days, first_test, policy))
        .collect()
}

fn predict(p: Predictor, days: &[(i64, [Option<f64>; 24])], i: usize, h: usize) -> Option<f64> {
    let day = days[i].0;
    let earlier = |back: i64| {
        days[..i]
            .iter()
            .rev()
            .find(|(d, _)| *d == day - back)
            .and_then(|(_, loads)| loads[h])
    };
    match p {
        Predictor::HourOfDay => {
            let mut m = HourOfDayPredictor::default();
            for (_, d) in &days[..i] {
                m.learn(d);
            }
            m.predict(h)
        }
        Predictor::Yesterday => earlier(1),
        Predictor::LastWeek => earlier(7),
        Predictor::Oracle => days[i].1[h],
    }
}

fn score(
    p: Predictor,
    days: &[(i64, [Option<f64>; 24])],
    first_test: usize,
    policy: &GearPolicy,
) -> PredictorScore {
    let (mut squared, mut actual_sum) = (0.0, 0.0);
    let mut s = PredictorScore {
        predictor: p,
        test_hours: 0,
        predicted_hours: 0,
        rms_error_normalized: 0.0,
        gears_correct: 0,
        hours_under_geared: 0,
        hours_over_geared: 0,
        fraction_on: 0.0,
    };
    let mut on = 0.0;
    for i in first_test..days.len() {
        for h in 0..24 {
            let Some(actual) = days[i].1[h] else {
                continue;
            };
            s.test_hours += 1;
            actual_sum += actual;
            let predicted = predict(p, days, i, h);
            let gear = match predicted {
                Some(x) => {
                    s.predicted_hours += 1;
                    squared += (x - actual).powi(2);
                    policy.gear(x, h)
                }
                None => policy.replicas,
            };
            let needed = policy.gear(actual, h);
            match gear.cmp(&needed) {
                std::cmp::Ordering::Equal => s.gears_correct += 1,
                std::cmp::Ordering::Less => s.hours_under_geared += 1,
                std::cmp::Ordering::Greater => s.hours_over_geared += 1,
            }
            on += gear as f64 / policy.replicas as f64;
        }
    }
    assert_eq!(
        s.gears_correct + s.hours_under_geared + s.hours_over_geared,
        s.test_hours,
        "every test hour is right, under- or over-geared"
    );
    debug_assert!(s.predicted_hours <= s.test_hours);
    let mean = actual_sum / s.test_hours.max(1) as f64;
    let rms = (squared / s.predicted_hours.max(1) as f64).sqrt();
    s.rms_error_normalized = if mean > 0.0 { rms / mean } else { 0.0 };
    s.fraction_on = on / s.test_hours.max(1) as f64;
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(d: i64, f: impl Fn(usize) -> f64) -> (i64, [Option<f64>; 24]) {
        let mut loads = [None; 24];
        for (h, l) in loads.iter_mut().enumerate() {
            *l = Some(f(h));
        }
        (d, loads)
    }

    #[test]
    fn each_predictor_sees_only_the_days_before_and_is_scored_on_the_same_hours() {
        // r = 3 servers, N = 3: gear = ⌈L⌉. Weekdays busy afternoons (2.5), weekends flat (0.5).
        let policy = GearPolicy::new(3, 3, 1, vec![]).unwrap();
        let days: Vec<_> = (0..15)
            .map(|d| {
                let weekend = d % 7 >= 5;
                day(d, move |h| {
                    if !weekend && (12..18).contains(&h) {
                        2.5
                    } else {
                        0.5
                    }
                })
            })
            .collect();
        let scores = compare(&days, 7, &policy);
        let by = |p| scores.iter().find(|s| s.predictor == p).unwrap();
        // Same hour last week is exact on a purely weekly load.
        let week = by(Predictor::LastWeek);
        assert_eq!(week.rms_error_normalized, 0.0);
        assert_eq!(week.gears_correct, week.test_hours);
        assert_eq!(week.test_hours, 8 * 24);
        // Yesterday misses the afternoons of the two Mondays (under) and of the Saturday (over).
        let y = by(Predictor::Yesterday);
        assert_eq!(y.gears_correct, 8 * 24 - 3 * 6, "{y:?}");
        assert_eq!((y.hours_under_geared, y.hours_over_geared), (12, 6));
        // The hour-of-day mean under-gears no weekday afternoon, over-gears weekends'.
        let hod = by(Predictor::HourOfDay);
        assert!(hod.rms_error_normalized > 0.0);
        let oracle = by(Predictor::Oracle);
        assert_eq!(oracle.gears_correct, oracle.test_hours);
        assert!(oracle.fraction_on <= week.fraction_on + 1e-12);
        assert!(hod.fraction_on >= oracle.fraction_on);
    }

    #[test]
    fn hours_nobody_can_predict_run_in_the_top_gear() {
        let policy = GearPolicy::new(3, 3, 1, vec![]).unwrap();
        let days: Vec<_> = (0..3).map(|d| day(d, |_| 0.5)).collect();
        let scores = compare(&days, 1, &policy);
        let week = scores
            .iter()
            .find(|s| s.predictor == Predictor::LastWeek)
            .unwrap();
        assert_eq!(week.predicted_hours, 0);
        assert_eq!(week.hours_over_geared, 48);
        assert_eq!(week.fraction_on, 1.0);
    }
}
