//! §3.4's hour-of-day predictor against baselines (`cordillera_gears::predict`) on workloads of
//! several weeks: two generated from a seed — a diurnal load with a weekly pattern (weekends at
//! 60 %) and noise, and the same with a holiday (a Wednesday at the weekend's level) — and
//! every load trace of the run (its whole days). Loads are normalised so the busiest hour
//! outside maintenance needs all N = r servers, as Figure 8's analysis does; each day is
//! predicted from the days before it, from the second week on when there is one (so that "last
//! week" can predict), else from the second day.

use serde::Serialize;

use cordillera_gears::predict::{compare, PredictorScore};
use cordillera_gears::schedule::GearPolicy;
use cordillera_types::rng::SimRng;

/// Days of hourly loads (one entry per calendar day; an hour without a load is `None`).
pub type Days = Vec<(i64, [Option<f64>; 24])>;

/// Weeks of the generated workloads.
pub const GENERATED_WEEKS: usize = 3;
/// The holiday of the second generated workload: the Wednesday of its third week.
pub const HOLIDAY: usize = 16;

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadScores {
    pub workload: String,
    pub days: usize,
    /// The first day predicted (index into the days), and how many are.
    pub first_test_day: usize,
    pub test_days: usize,
    pub scores: Vec<PredictorScore>,
}

/// The share of the peak at each hour of a weekday: a trough at night, a peak in the afternoon.
fn diurnal(hour: usize) -> f64 {
    let x = (hour as f64 - 15.0) / 24.0 * std::f64::consts::TAU;
    0.55 + 0.45 * x.cos()
}

/// `weeks` of a diurnal load with weekends at 60 % and multiplicative noise (σ ≈ 10 %), a
/// holiday at day `holiday` if given; day 0 is a Monday.
pub fn generated(weeks: usize, holiday: Option<usize>, seed: u64) -> Days {
    let mut rng = SimRng::new(seed, 0x5EED_DA75);
    (0..weeks * 7)
        .map(|d| {
            let quiet = d % 7 >= 5 || holiday == Some(d);
            let mut loads = [None; 24];
            for (h, l) in loads.iter_mut().enumerate() {
                // The sum of four uniforms, centred: roughly normal, σ = 0.1.
                let noise: f64 = (0..4).map(|_| rng.unit()).sum::<f64>() - 2.0;
                let level = if quiet { 0.6 } else { 1.0 };
                *l = Some((level * diurnal(h) * (1.0 + 0.173 * noise)).max(0.0));
            }
            (d as i64, loads)
        })
        .collect()
}

/// The loads scaled so the busiest hour outside `maintenance_hours` is `replicas` (N = r).
pub fn normalised(days: &Days, replicas: usize, maintenance_hours: &[usize]) -> Days {
    let peak = days
        .iter()
        .flat_map(|(_, d)| d.iter().enumerate())
        .filter(|(h, _)| !maintenance_hours.contains(h))
        .filter_map(|(_, l)| *l)
        .fold(0.0, f64::max);
    let scale = if peak > 0.0 {
        replicas as f64 / peak
    } else {
        1.0
    };
    days.iter()
        .map(|(d, loads)| (*d, loads.map(|l| l.map(|l| l * scale))))
        .collect()
}

/// Every predictor on `days` (already normalised).
pub fn score(
    workload: &str,
    days: &Days,
    replicas: usize,
    g_min: usize,
    maintenance_hours: &[usize],
) -> Result<WorkloadScores, String> {
    if days.len() < 2 {
        return Err(format!(
            "{workload}: {} whole day(s): predicting needs two or more",
            days.len()
        ));
    }
    let policy = GearPolicy::new(replicas, replicas, g_min, maintenance_hours.to_vec())
        .map_err(|e| e.to_string())?;
    let first_test_day = if days.len() >= 9 { 7 } else { 1 };
    Ok(WorkloadScores {
        workload: workload.to_owned(),
        days: days.len(),
        first_test_day,
        test_days: days.len() - first_test_day,
        scores: compare(days, first_test_day, &policy),
    })
}

/// The two generated workloads of `seed`.
pub fn generated_scores(
    seed: u64,
    replicas: usize,
    g_min: usize,
) -> Result<Vec<WorkloadScores>, String> {
    let weekly = normalised(&generated(GENERATED_WEEKS, None, seed), replicas, &[]);
    let holiday = normalised(
        &generated(GENERATED_WEEKS, Some(HOLIDAY), seed),
        replicas,
        &[],
    );
    Ok(vec![
        score(
            &format!("generated: {GENERATED_WEEKS} weeks, weekly pattern, noise"),
            &weekly,
            replicas,
            g_min,
            &[],
        )?,
        score(
            &format!("generated: the same with a holiday on day {HOLIDAY} (a Wednesday)"),
            &holiday,
            replicas,
            g_min,
            &[],
        )?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_gears::predict::Predictor;

    #[test]
    fn a_weekly_pattern_favours_last_week_and_a_holiday_costs_it() {
        let all = generated_scores(1, 3, 1).unwrap();
        let get =
            |w: &WorkloadScores, p| w.scores.iter().find(|s| s.predictor == p).unwrap().clone();
        let (weekly, holiday) = (&all[0], &all[1]);
        assert_eq!((weekly.days, weekly.first_test_day), (21, 7));
        let week = get(weekly, Predictor::LastWeek);
        let hod = get(weekly, Predictor::HourOfDay);
        let yesterday = get(weekly, Predictor::Yesterday);
        // Weekends differ from weekdays: the hour-of-day mean over all days errs more than the
        // same hour last week.
        assert!(
            week.rms_error_normalized < hod.rms_error_normalized,
            "{week:?} {hod:?}"
        );
        assert!(week.rms_error_normalized < yesterday.rms_error_normalized);
        // The holiday: last week's Wednesday over-gears it, and next week's would not see it.
        let week_h = get(holiday, Predictor::LastWeek);
        assert!(week_h.rms_error_normalized > week.rms_error_normalized);
        // The oracle is the energy floor of every predictor that never under-gears (one that
        // does saves more, at the cost of those hours).
        let oracle = get(weekly, Predictor::Oracle);
        assert_eq!(oracle.hours_under_geared + oracle.hours_over_geared, 0);
        for s in weekly.scores.iter().filter(|s| s.hours_under_geared == 0) {
            assert!(s.fraction_on >= oracle.fraction_on - 1e-12, "{s:?}");
        }
        // The seed changes the noise.
        let other = generated_scores(2, 3, 1).unwrap();
        assert_ne!(
            get(&other[0], Predictor::HourOfDay).rms_error_normalized,
            hod.rms_error_normalized
        );
    }
}
