//! Sierra's gear scheduler on real processes (§3.4): no plan is given; the chunk servers report
//! their load every second, the MDS keeps each hour's peak and plans every day from the days
//! before it. Compressed hours of 2 s: a day of a diurnal load driven through NBD by fio
//! (busy 12:00–18:00, quiet otherwise), verified with crc32c throughout, then the second day's
//! shifts — made by the MDS alone — and its plan against the offline predictor's on the hours
//! the MDS measured.

mod cluster;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cordillera_gears::load::HourLoad;
use cordillera_gears::schedule::{days, GearPolicy, HourMetric, HourOfDayPredictor};
use cordillera_testkit::cluster::{ClusterOptions, Daemon, LocalCluster};
use cordillera_testkit::process::{fio_verify as fio, have};

use cluster::{binary, start_volume};

const HOUR_S: u64 = 2;
const DAY_S: u64 = 24 * HOUR_S;
/// Writes per second in busy and quiet hours, on servers of 50 IOPS: L = 3 × 150 / 50 = 9 of
/// 6 servers (gear 3) and 3 × 5 / 50 = 0.3 (gear 1).
const BUSY_IOPS: u32 = 150;
const QUIET_IOPS: u32 = 5;
const BUSY_HOURS: std::ops::Range<u64> = 12..18;

fn unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn the_mds_learns_the_gears_from_measured_load_and_shifts_by_itself() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The day starts 10 s from now (the cluster is up by then).
    let start = unix_s().ceil() as u64 + 10;
    let offset = (DAY_S - start % DAY_S) % DAY_S;
    let options = ClusterOptions {
        hour_seconds: HOUR_S,
        wake_seconds: 0.3,
        logger_size: "256m".into(),
        spec_settings: vec![
            "schedule=learned".into(),
            format!("day_offset_s={offset}"),
            r#"server_performance={"read_iops":50,"write_iops":50,"read_bytes_per_s":52428800,"write_bytes_per_s":52428800}"#.into(),
        ],
        ..ClusterOptions::default()
    };
    let c = LocalCluster::start(binary(), dir.path(), options).unwrap_or_else(|e| panic!("{e}"));
    let (_vol, url) = start_volume(&c, "diurnal", "64m");
    let clock = |t: f64| t + offset as f64;
    // Day 0 (measured, learned from) and day 1 until its busy hours are over.
    let day0 = (clock(start as f64) as u64) / DAY_S;
    let day1 = day0 + 1;
    let end = day1 * DAY_S + (BUSY_HOURS.end + 1) * HOUR_S;
    let mut phases = 0;
    loop {
        let now = clock(unix_s());
        if now >= end as f64 {
            break;
        }
        let hour = (now as u64 / HOUR_S) % 24;
        let busy = BUSY_HOURS.contains(&hour);
        // To the end of this busy or quiet stretch, a margin short of it so that no burst
        // spills into the next hour.
        let day_start = (now as u64 / DAY_S) * DAY_S;
        let stretch_end = if busy {
            day_start + BUSY_HOURS.end * HOUR_S
        } else if hour < BUSY_HOURS.start {
            day_start + BUSY_HOURS.start * HOUR_S
        } else {
            day_start + DAY_S
        }
        .min(end);
        let runtime = stretch_end as f64 - now - 0.4;
        if runtime < 0.5 {
            std::thread::sleep(Duration::from_secs_f64(
                (stretch_end as f64 - now).max(0.0) + 0.3,
            ));
            continue;
        }
        let text = fio(
            &url,
            &[
                "--rw=randwrite",
                "--bs=4k",
                "--size=48m",
                "--verify_backlog=16",
                &format!("--rate_iops={}", if busy { BUSY_IOPS } else { QUIET_IOPS }),
                "--time_based",
                // In milliseconds: fio reads `--runtime=0.5` as 0 s, which with
                // `--time_based` runs until killed (seen: a run hung for minutes).
                &format!("--runtime={}ms", (runtime * 1000.0) as u64),
            ],
        );
        assert!(text.contains("err= 0"), "{text}");
        phases += 1;
    }
    let mds = c.status(Daemon::Mds).unwrap();
    let schedule = &mds["schedule"];
    assert_eq!(schedule["schedule"], "learned", "{schedule}");

    // The plan of day 1 is the offline predictor's on the day the MDS measured.
    let measured: Vec<HourLoad> = serde_json::from_value(schedule["measured"].clone()).unwrap();
    let policy = GearPolicy::new(6, 3, 1, vec![]).unwrap();
    let learned: Vec<HourLoad> = measured
        .iter()
        .copied()
        .filter(|h| h.day() < day1 as i64)
        .collect();
    let mut p = HourOfDayPredictor::default();
    for (_, d) in days(&learned, HourMetric::Peak, 0.5 * HOUR_S as f64 / 3600.0) {
        p.learn(&d);
    }
    let offline = p.plan(day1 as i64, &policy);
    let today: Vec<usize> = serde_json::from_value(schedule["today"].clone()).unwrap();
    assert_eq!(today, offline.gears.to_vec(), "{schedule}");
    // It is the diurnal pattern: the busy hours in gear 3, the quiet ones in gear 1.
    for (h, &g) in today.iter().enumerate() {
        let want = if BUSY_HOURS.contains(&(h as u64)) {
            3
        } else {
            1
        };
        assert_eq!(g, want, "hour {h}: {today:?}\n{schedule}");
    }

    // Day 1's shifts were the MDS's own: into gear 3 for the busy hours and back to 1.
    let since_start = |t: f64| t - (mds["uptime_s"].as_f64().unwrap() - unix_s());
    let day1_start = (day1 * DAY_S - offset) as f64;
    let shifts = mds["shifts"].as_array().unwrap();
    let on_day1: Vec<(u64, u64)> = shifts
        .iter()
        .filter(|s| since_start(s["at_s"].as_f64().unwrap()) >= day1_start - 1.0)
        .map(|s| {
            assert_eq!(s["by_hand"], false, "{s}");
            (s["from"].as_u64().unwrap_or(0), s["to"].as_u64().unwrap())
        })
        .collect();
    assert!(on_day1.contains(&(1, 3)), "{on_day1:?}: {shifts:?}");
    assert!(on_day1.contains(&(3, 1)), "{on_day1:?}: {shifts:?}");
    let stats = &mds["stats"];
    println!(
        "learned schedule: {phases} fio phases verified, {} hours measured, day 1 planned {today:?}, shifts on day 1 {on_day1:?}, {} standbys, {} wakes, {} late load reports",
        schedule["hours_measured"], stats["standbys"], stats["wakes"], schedule["late_reports"]
    );
}
