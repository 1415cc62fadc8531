use super::*;
use crate::sierra::analysis::ScheduledHour;

/// Two days: gear 1 by default, the maintenance hours 0–1 in gear 3, and whatever `set` adds;
/// `bytes` written in every hour.
fn schedule(set: &[(i64, usize)], bytes: u64) -> (Vec<ScheduledHour>, Vec<(i64, u64)>) {
    let hours: Vec<ScheduledHour> = (0..48)
        .map(|hour| {
            let gear = set
                .iter()
                .find(|s| s.0 == hour)
                .map(|s| s.1)
                .unwrap_or(if hour % 24 < 2 { 3 } else { 1 });
            ScheduledHour {
                hour,
                hour_of_day: (hour % 24) as usize,
                peak_servers: gear as f64 * 4.0 + (hour % 5) as f64 * 0.1,
                mean_servers: gear as f64 * 3.0 + (hour % 7) as f64 * 0.1,
                gears: vec![gear],
            }
        })
        .collect();
    let written = (0..48).map(|h| (h, bytes)).collect();
    (hours, written)
}

#[test]
fn windows_avoid_the_maintenance_hours_when_one_qualifies_outside() {
    // An up-shift at midnight after 22 low hours (most written), one at 13:00 on day 2 after
    // 11, and down-shifts out of maintenance at 2:00 and at 15:00 (3 → 2, busier next hour).
    let set: Vec<(i64, usize)> = vec![(37, 3), (38, 3), (39, 2)];
    let (hours, written) = schedule(&set, 1 << 30);
    let maintenance = [0, 1];
    let chosen = choose_windows(&hours, 0, &written, &maintenance, false);
    assert_eq!(
        chosen.upshift,
        Some(37),
        "the largest up-shift outside maintenance"
    );
    let literal = choose_windows(&hours, 0, &written, &maintenance, true);
    assert_eq!(
        literal.upshift,
        Some(24),
        "§4.5 read literally: the midnight one"
    );
    for w in [chosen.steady, chosen.downshift].into_iter().flatten() {
        assert!(
            w.rem_euclid(24) >= 2 && (w - 1).rem_euclid(24) >= 2,
            "{chosen:?}"
        );
    }
    assert_eq!(chosen.downshift, Some(39));
    // No maintenance hours: the literal choice.
    assert_eq!(choose_windows(&hours, 0, &written, &[], false), literal);
}

#[test]
fn windows_fall_back_to_the_maintenance_hours_when_nothing_qualifies_outside() {
    // Gears change only around maintenance: the experiments still run there.
    let (hours, written) = schedule(&[], 1 << 30);
    let chosen = choose_windows(&hours, 0, &written, &[0, 1], false);
    assert_eq!(chosen.upshift, Some(24));
    assert_eq!(chosen.downshift.map(|h| h.rem_euclid(24)), Some(2));
    assert!(chosen.steady.is_some_and(|h| h.rem_euclid(24) >= 2));
}
