use super::*;
use cordillera_trace::format::Format;

fn info() -> TraceInfo {
    TraceInfo {
        format: Format::Binary,
        origin_unix_ns: None,
        has_time: true,
        last_line_unterminated: false,
    }
}

fn read(time_ns: i64, block: u64) -> Record {
    Record {
        time_ns,
        volume: VolumeId(0),
        op: Op::Read,
        offset_bytes: block * BLOCK_BYTES,
        length_bytes: BLOCK_BYTES,
        response_ns: None,
    }
}

/// Three "days" of an hour each: every day reads the same 64 blocks, twice, in order; a
/// warmed cache starts each day with them, a cold one misses them once.
fn repeating_days() -> (Vec<Record>, VolumeTable, Options) {
    let hour = NS_PER_HOUR;
    let mut records = Vec::new();
    for day in 0..3i64 {
        for k in 0..128i64 {
            records.push(read(day * hour + k * (hour / 128), (k % 64) as u64));
        }
    }
    let mut names = VolumeTable::new();
    names.intern(b"v").unwrap();
    let o = Options {
        day_ns: hour,
        interval_ns: hour / 4,
        cache_pcts: vec![100.0],
        warmup_pcts: vec![100.0],
        region_bytes: vec![4096],
        th_vs: vec![0.9],
        th_ns: vec![0.0],
        middle: Setting {
            cache_pct: 100.0,
            warmup_pct: 100.0,
            region_bytes: 4096,
            th_v: 0.9,
            th_n: 0.0,
        },
        figure_day: None,
        threads: 2,
        ..Options::default()
    };
    (records, names, o)
}

#[test]
fn days_warmed_from_the_day_before_converge_at_once() {
    let (records, names, o) = repeating_days();
    let r = run("t", records, &names, &info(), &o, &|_| {}).unwrap();
    assert_eq!(r.volumes[0].days, 3);
    // Days 2 and 3, one grid point, four algorithms.
    assert_eq!(r.cases.len(), 2 * 4);
    for c in &r.cases {
        // Cold misses the first half hour (64 blocks once), then hits: it converges after
        // two intervals; every algorithm loads all 64 blocks and converges at once.
        assert_eq!(c.cold_converge_h, Some(0.5), "{c:?}");
        assert_eq!(c.warmed_converge_h, Some(0.0), "{c:?}");
        assert_eq!(c.load_reduction_cold_pct, Some(0.0));
        assert_eq!(c.load_reduction_always_pct, Some(100.0));
        assert_eq!(c.load_reduction_warmed_pct, Some(100.0));
        assert_eq!(c.preload_blocks, 64);
    }
    let row = &r.table[0];
    assert_eq!(row.cases, 2);
    assert_eq!(row.cold_converge_h, Some(0.5));
    assert_eq!(row.bonfire_converge_h, Some(0.0));
    // 64 blocks at 100 MB/s take 2.6 ms: almost all of the improvement remains.
    assert!(row.converge_improvement_pct.unwrap() > 99.9);
    assert_eq!(r.figures.len(), 1);
    assert_eq!(r.figures[0].day, 3);
    assert_eq!(r.headline.cases, 2);
    for t in &r.headline.algorithms {
        assert_eq!(t.best_converge, 2);
        assert_eq!(t.converges_sooner_than_cold, 2);
    }
}

#[test]
fn last_k_beats_first_k_when_the_end_of_the_day_predicts_the_next() {
    // Each day reads 64 "morning" blocks, then 64 "evening" ones; the next day starts with
    // the evening blocks again. A warm-up of half the working set: Last-K takes the evening,
    // First-K the morning.
    let hour = NS_PER_HOUR;
    let mut records = Vec::new();
    for day in 0..3i64 {
        let base = day * hour;
        let step = hour / 256;
        let mut t = base;
        // The previous evening's blocks first (day 0 has none before), read twice.
        for _ in 0..2 {
            for b in 0..64 {
                records.push(read(t, 1000 + day as u64 * 100 + b));
                t += step;
            }
        }
        // Morning blocks, never read again.
        for b in 0..64 {
            records.push(read(t, 10_000 + day as u64 * 100 + b));
            t += step;
        }
        // Evening blocks, read first thing next day.
        for b in 0..64 {
            records.push(read(t, 1000 + (day as u64 + 1) * 100 + b));
            t += step;
        }
    }
    records.sort_by_key(|r| r.time_ns);
    let mut names = VolumeTable::new();
    names.intern(b"v").unwrap();
    let (_, _, base) = repeating_days();
    let wss = algorithms::working_set_blocks(&records) as f64;
    let warm = (64.0 / wss * 100.0 * 1000.0).round() / 1000.0;
    let o = Options {
        warmup_pcts: vec![warm],
        middle: Setting {
            warmup_pct: warm,
            ..base.middle
        },
        ..base
    };
    let r = run("t", records, &names, &info(), &o, &|_| {}).unwrap();
    let f = &r.figures[0];
    let get = |a: Algorithm| f.algorithms.iter().find(|x| x.algorithm == a).unwrap();
    assert!(
        get(Algorithm::LastK).load_reduction_pct > get(Algorithm::FirstK).load_reduction_pct,
        "{f:?}"
    );
    assert!(
        later_if_never(get(Algorithm::LastK).converge_h) < later_if_never(f.cold_converge_h),
        "{f:?}"
    );
    assert_eq!(r.volumes[0].measured_best, Some(Algorithm::LastK));
}

#[test]
fn days_can_start_at_a_wall_clock_hour() {
    // Clock origin at 17:00; a request at 18:00; days from 02:00 start at 02:00 that day,
    // 16 hours before the request.
    let origin_ns = 17 * NS_PER_HOUR;
    assert_eq!(
        origin(NS_PER_HOUR, origin_ns, Some(2), NS_PER_DAY),
        NS_PER_HOUR - 16 * NS_PER_HOUR
    );
    assert_eq!(origin(5, origin_ns, None, NS_PER_DAY), 5);
}

#[test]
fn bad_options_and_traces_are_errors() {
    let (records, names, o) = repeating_days();
    let bad = Options {
        interval_ns: NS_PER_HOUR / 7 + 1,
        ..o.clone()
    };
    assert!(run("t", records.clone(), &names, &info(), &bad, &|_| {}).is_err());
    let off_grid = Options {
        middle: Setting {
            cache_pct: 33.0,
            ..o.middle
        },
        ..o.clone()
    };
    assert!(off_grid.validate().is_err());
    let one_day: Vec<Record> = records.into_iter().take(100).collect();
    let e = run("t", one_day, &names, &info(), &o, &|_| {}).unwrap_err();
    assert!(e.contains("two days"), "{e}");
}

#[test]
fn zipf_warmed_with_everything_matches_always_warm_at_once() {
    let o = ZipfOptions {
        workload: Zipf {
            count: 200_000,
            alpha: 0.4,
            span_bytes: 256 << 20,
            rate_per_s: 1000.0,
            seed: 3,
        },
        ..ZipfOptions::default()
    };
    let r = zipf(&o).unwrap();
    let get = |name: &str| r.series.iter().find(|s| s.scheme == name).unwrap();
    let (always, cold, full, quarter) = (
        get("always-warm"),
        get("cold"),
        get("bonfire 100 %"),
        get("bonfire 25 %"),
    );
    // 100 % of the working set holds everything the first half read: converged at once.
    assert_eq!(full.converge_io, Some(r.start_io));
    // More warm-up, sooner convergence and more hits; cold does not converge by the end.
    let order: Vec<&ZipfSeries> = ["cold", "bonfire 25 %", "bonfire 50 %", "bonfire 75 %"]
        .iter()
        .map(|n| get(n))
        .chain([full])
        .collect();
    let never_last = |s: &ZipfSeries| s.converge_io.unwrap_or(u64::MAX);
    for w in order.windows(2) {
        assert!(never_last(w[0]) >= never_last(w[1]), "{r:?}");
        assert!(w[0].hit_rate < w[1].hit_rate, "{r:?}");
    }
    assert_eq!(
        cold.converge_io, None,
        "cold never converges: null, not a time"
    );
    assert!(get("bonfire 75 %").converge_io.is_some());
    assert!(quarter.hit_rate > cold.hit_rate);
    assert_eq!(full.hit_rate, always.hit_rate);
}

/// A trace ordered by completion may deliver a request after the next day has begun: the
/// streaming pass counts it in the day being filled and the run goes on, with every day
/// warmed as before.
#[test]
fn a_request_arriving_after_its_day_closed_is_counted_in_the_next() {
    let (mut records, names, o) = repeating_days();
    // The last request of day 1 (hour 0) arrives just after day 2's first.
    let late = records.remove(127);
    records.insert(128, late);
    assert!(records[128].time_ns < records[127].time_ns, "out of order");
    let r = run("t", records, &names, &info(), &o, &|_| {}).unwrap();
    assert_eq!(r.late_requests, 1, "the one late request, counted");
    assert_eq!(r.volumes[0].days, 3);
    assert_eq!(r.cases.len(), 2 * 4, "days 2 and 3, four algorithms");
    assert_eq!(r.headline.cases, 2);
}

#[test]
fn the_middle_setting_is_the_papers_where_the_grid_has_it() {
    let m = Setting::middle_of_grids(
        &[25.0, 50.0],
        &[5.0, 25.0, 40.0],
        &[4096],
        &[0.8],
        &[0.01, 0.05],
    );
    assert_eq!(m.cache_pct, 50.0, "the paper's value, in the grid");
    assert_eq!(m.warmup_pct, 25.0, "not in the grid: its middle value");
    assert_eq!(m.region_bytes, 4096);
    assert_eq!(m.th_v, 0.8);
    assert_eq!(m.th_n, 0.05, "of two, the upper middle");
}
