//! `cordillera lab everest` end to end: the documented JSON, the output folder, and the
//! acceptance figure (peak off-load cuts the mean response time of the Exchange-like
//! write-dominated episode at least tenfold).

use cordillera_testkit::process::{Bounded, COMMAND_LIMIT};
use std::process::Command;

#[test]
fn lab_everest_on_the_exchange_like_first_episode() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args([
            "lab",
            "everest",
            "--workload",
            "exchange-like",
            "--episodes",
            "1",
        ])
        .args(["--main-only", "--json", "--out"])
        .arg(dir.path())
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = &json["episodes"][0];
    let read_pct = e["read_pct"].as_f64().unwrap();
    assert!(
        (30.0..45.0).contains(&read_pct),
        "episode 1 is write-dominated: {read_pct}"
    );
    let mut means = Vec::new();
    for config in ["baseline", "always", "peak"] {
        for key in [
            "mean_ms",
            "read_mean_ms",
            "write_mean_ms",
            "read_p99_ms",
            "write_p99_ms",
        ] {
            assert!(
                e["configs"][config][key].as_f64().is_some(),
                "{config}.{key}"
            );
        }
        means.push(e["configs"][config]["mean_ms"].as_f64().unwrap());
    }
    let (baseline, always, peak) = (means[0], means[1], means[2]);
    println!("episode 1: baseline {baseline:.1} ms, always {always:.2} ms, peak {peak:.2} ms");
    assert!(
        baseline >= 10.0 * peak,
        "peak off-load ≥ 10×: {baseline} vs {peak}"
    );
    assert!(
        always < peak,
        "always off-load beats peak off-load on a write peak"
    );
    assert_eq!(e["configs"]["peak"]["offloaded_at_end_bytes"], 0);
    for file in [
        "report.json",
        "fig5_response_times.csv",
        "fig6_offloaded.csv",
        "fig5_response_times.svg",
        "fig6_offloaded.svg",
    ] {
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        assert!(text.len() > 100, "{file} holds something");
    }
    let csv = std::fs::read_to_string(dir.path().join("fig5_response_times.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        4,
        "a header and three configurations:\n{csv}"
    );
}

#[test]
fn lab_everest_refuses_bad_flags() {
    for args in [
        &["lab", "everest", "--sample-s", "0"][..],
        &["lab", "everest", "--sample-s", "0.05"],
        &["lab", "everest", "--seeds", "0"],
        &[
            "lab",
            "everest",
            "--trace",
            "gen:bursty:seed=3",
            "--seeds",
            "2",
        ],
        &[
            "lab",
            "everest",
            "--segment-s",
            "90",
            "--rate-window-s",
            "60",
        ],
        &["lab", "everest", "--trace", "/nonexistent/trace.csv"],
        &["lab", "everest", "--parts", "oltp", "--oltp-writes", "1"],
        &["lab", "everest", "--trace", "-"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(args)
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cordillera: error:"), "{args:?}: {err}");
    }
}

/// §4.2's OLTP experiment (Figures 9, 11, 12) on a short run: every bar, its CSV, and the
/// shapes that follow from the disk model — a 2-disk RAID-0 about doubles the baseline;
/// off-loading the writes gains, and never beyond 1 / (1 − write fraction) while every read
/// stays on the client's disk; with more writes it gains more.
#[test]
fn lab_everest_oltp_figures_9_11_12() {
    let run = |writes: &str| {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args([
                "lab",
                "everest",
                "--parts",
                "oltp",
                "--micro-s",
                "1",
                "--quiet",
            ])
            // Figures 5 and 6 always run first; on a small generated trace they take a
            // second rather than two minutes (this test is about the OLTP figures).
            .args(["--trace", "gen:zipf:count=20000", "--episodes", "1"])
            .args(["--segment-s", "60", "--rate-window-s", "10"])
            .args(["--oltp-writes", writes, "--json", "--out"])
            .arg(dir.path())
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("fig9_11_12_oltp.csv")).unwrap();
        (json["oltp"].clone(), csv)
    };
    let ratio = |o: &serde_json::Value, figure: &str, i: usize| {
        o[figure][i]["over_baseline"].as_f64().unwrap()
    };
    let (o, csv) = run("0.3");
    assert_eq!(o["figure9"].as_array().unwrap().len(), 5);
    assert_eq!(o["figure11_stores"].as_array().unwrap().len(), 3);
    assert_eq!(o["figure11_clients"].as_array().unwrap().len(), 3);
    assert_eq!(o["figure12"].as_array().unwrap().len(), 4);
    assert_eq!(csv.lines().count(), 1 + 15, "{csv}");
    assert!(o["baseline_iops"].as_f64().unwrap() > 0.0);
    let ceiling = o["read_bound_ceiling"].as_f64().unwrap();
    assert!((ceiling - 1.0 / 0.7).abs() < 1e-9);
    let raid0 = ratio(&o, "figure9", 3);
    assert!((1.6..2.6).contains(&raid0), "2-disk RAID-0: {raid0}×");
    let offload = ratio(&o, "figure9", 1);
    assert!(
        offload > 1.15 && offload <= ceiling * 1.05,
        "off-load: {offload}× (ceiling {ceiling})"
    );
    let (o, _) = run("0.7");
    let more = ratio(&o, "figure9", 1);
    assert!(
        more > offload * 1.5,
        "70 % writes: {more}× against {offload}× at 30 %"
    );
}

/// `lab bonfire` on three days of gen:reaccess with a small grid and a small Zipf workload:
/// the documented JSON and files, and the paper's headline comparisons on this workload
/// (Last-K best on the hourly-reaccess volume; warmed caches reduce more load than cold).
#[test]
fn lab_bonfire_on_three_days_of_reaccess_and_a_small_zipf() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(["lab", "bonfire", "--days", "3", "--cache-pct", "50,100"])
        .args(["--warmup-pct", "10", "--region", "4k,1m", "--th-v", "0.8"])
        .args([
            "--th-n",
            "0.03",
            "--zipf-count",
            "200000",
            "--json",
            "--out",
        ])
        .arg(dir.path())
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let days = &json["days"];
    let volumes = days["volumes"].as_array().unwrap();
    assert_eq!(volumes.len(), 2);
    let hourly = &volumes[0];
    assert_eq!(hourly["volume"], "hourly");
    assert_eq!(hourly["days"], 3);
    assert_eq!(hourly["recommendation"]["algorithm"], "last-k");
    assert_eq!(hourly["measured_best"], "last-k", "{hourly}");
    let daily = &volumes[1];
    assert_eq!(daily["recommendation"]["algorithm"], "first-k");
    assert_eq!(daily["recommendation"]["start_at_hour"], 2);
    // Two cache sizes × two regions × one of everything else.
    let table = days["table"].as_array().unwrap();
    assert_eq!(table.len(), 4);
    for row in table {
        // Two volumes × days 2 and 3.
        assert_eq!(row["cases"], 4, "{row}");
        assert!(row["preload_min"].as_f64().unwrap() > 0.0);
    }
    // Warmed beats cold at the middle setting: every algorithm converges no later than cold,
    // and Last-K reduces more load than cold on every (volume, day) where cold takes time.
    let headline = &days["headline"];
    assert_eq!(headline["cases"], 4);
    for t in headline["algorithms"].as_array().unwrap() {
        assert_eq!(t["converges_no_later_than_cold"], 4, "{t}");
    }
    let last_k = &headline["algorithms"][0];
    assert_eq!(last_k["algorithm"], "last-k");
    assert!(
        last_k["reduces_more_load_than_cold"].as_u64().unwrap() >= 3,
        "{last_k}"
    );
    // The daily volume again with days from 02:00: First-K reduces the most load there (the
    // median over days; the first such day follows a partial day without the nightly job).
    let shifted = &days["shifted_daily"][0];
    assert_eq!(shifted["volume"], "daily");
    assert_eq!(shifted["day_start_hour"], 2);
    let algs = shifted["headline"]["algorithms"].as_array().unwrap();
    assert_eq!(algs[1]["algorithm"], "first-k");
    let median = |a: &serde_json::Value| a["median_load_reduction_pct"].as_f64().unwrap();
    for (i, a) in algs.iter().enumerate() {
        if i != 1 {
            assert!(median(&algs[1]) > median(a) + 5.0, "{shifted}");
        }
    }
    // Zipf: more warm-up, more hits; 100 % of the working set equals always-warm.
    let series = json["zipf"]["series"].as_array().unwrap();
    let names: Vec<&str> = series
        .iter()
        .map(|s| s["scheme"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "always-warm",
            "cold",
            "bonfire 25 %",
            "bonfire 50 %",
            "bonfire 75 %",
            "bonfire 100 %"
        ]
    );
    let rate = |i: usize| series[i]["hit_rate"].as_f64().unwrap();
    assert!(rate(1) < rate(2) && rate(2) < rate(3) && rate(3) <= rate(4));
    assert_eq!(rate(5), rate(0));
    for file in [
        "report.json",
        "cases.csv",
        "table3.csv",
        "fig6_7_algorithms.csv",
        "fig8_recommendations.csv",
        "fig10_zipf.csv",
        "table4_overheads.csv",
    ] {
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        assert!(text.lines().count() > 1, "{file} is empty");
        if file.ends_with(".csv") {
            // Every row has the header's fields (table4's workload names hold commas: they
            // must be quoted); the csv reader refuses a row of another length.
            let mut reader = csv::Reader::from_path(dir.path().join(file)).unwrap();
            let fields = reader.headers().unwrap().len();
            for row in reader.records() {
                let row = row.unwrap_or_else(|e| panic!("{file}: {e}"));
                assert_eq!(row.len(), fields, "{file}: {row:?}");
            }
        }
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("table3.csv"))
            .unwrap()
            .lines()
            .count(),
        5
    );
    for svg in [
        "fig6_convergence.svg",
        "fig7_load_reduction.svg",
        "fig10_zipf.svg",
        "hit_rate_hourly_day3.svg",
    ] {
        let text = std::fs::read_to_string(dir.path().join(svg)).unwrap();
        assert!(text.starts_with("<svg"), "{svg}");
    }
}

#[test]
fn lab_bonfire_refuses_bad_flags_and_short_traces() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(["lab", "bonfire"])
            .args(args)
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(run(&["--interval-s", "7"]).contains("divide"));
    assert!(run(&["--cache-pct", "0"]).contains("percentages"));
    assert!(run(&["--parts", "days", "--volume", "nope"]).contains("no such volume"));
    assert!(run(&["--parts", "days", "--days", "1"]).contains("two days"));
    assert!(run(&["--parts", "zipf", "--zipf-alpha", "0"]).contains("α"));
}

/// A real fragment: the two-hour CloudPhysics sample in half-hour periods, each warmed from the
/// one before. Checks the method runs on real data and that warming never delays convergence.
#[test]
fn lab_bonfire_on_the_cloudphysics_sample_in_half_hours() {
    let Some(dir) = cordillera_testkit::traces_dir("lab_bonfire_on_the_cloudphysics_sample") else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(["lab", "bonfire", "--parts", "days", "--trace"])
        .arg(dir.join("cloudphysics/cloudphysics_vscsi_sample.csv"))
        .args(["--day-s", "1800", "--interval-s", "60", "--json"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let days = &json["days"];
    assert_eq!(days["volumes"][0]["days"], 5);
    assert_eq!(days["volumes"][0]["requests"], 113_872);
    // 4 cache × 3 warm-up × 2 region × 3 Th_V × 3 Th_N points.
    assert_eq!(days["table"].as_array().unwrap().len(), 216);
    let h = &days["headline"];
    assert_eq!(h["cases"], 4);
    let last_k = &h["algorithms"][0];
    assert_eq!(last_k["converges_no_later_than_cold"], 4, "{h}");
    assert!(
        last_k["reduces_more_load_than_cold"].as_u64().unwrap() >= 2,
        "{h}"
    );
}

/// `lab sierra` on the generated Hotmail-like workload at a twentieth of its rate, for three
/// seeds: a week for the load-trace analysis, 48 hours for the schedule. Checks the acceptance
/// figures of the issue on this workload for every seed: gears predicted right at least 90 % of
/// the hours after 6 days of training, and at least 23 % of the power saved with g_min = 1 (the
/// schedule's estimate); that the seed changes the run; and the spread's files.
#[test]
fn lab_sierra_on_a_generated_week_and_two_days_over_three_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args([
            "lab",
            "sierra",
            "--week-rate-scale",
            "0.05",
            "--io-rate-scale",
            "0.05",
            "--parts",
            "analysis",
            "--seed",
            "7",
            "--seeds",
            "3",
        ])
        .args(["--json", "--out"])
        .arg(dir.path())
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all["seeds"], serde_json::json!([7, 8, 9]));
    let runs = all["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let mut correct_by_seed = Vec::new();
    for json in runs {
        let week = &json["load_traces"][0];
        assert_eq!(week["whole_days"], 7);
        let prediction = week["prediction"].as_array().unwrap();
        assert_eq!(prediction.len(), 6, "trained on 1 to 6 days");
        let six = &prediction[5];
        let correct = six["gears_correct"].as_f64().unwrap() / six["test_hours"].as_f64().unwrap();
        println!("gears correct after 6 days: {:.1} %", 100.0 * correct);
        assert!(correct >= 0.9, "{six}");
        correct_by_seed.push(six["gears_correct"].as_u64().unwrap());
        let schedule = &json["schedules"][0];
        assert_eq!(schedule["hours"].as_array().unwrap().len(), 48);
        let n = schedule["chunk_servers"].as_u64().unwrap();
        assert!(n >= 3 && n.is_multiple_of(3), "N = {n}");
        let g1 = &schedule["power"][0];
        assert_eq!(g1["g_min"], 1);
        let saved = 1.0 - g1["with_loggers_over_baseline"].as_f64().unwrap();
        println!("power saved with g_min 1: {:.1} %", 100.0 * saved);
        assert!(saved >= 0.23, "{g1}");
        // §4.5: 23 bytes per chunk; ours holds a chunk as (group, slot).
        let per_chunk = json["mds_state"]["size"]["bytes_per_chunk"]
            .as_f64()
            .unwrap();
        assert!(per_chunk > 0.0 && per_chunk <= 23.0, "{per_chunk}");
        let g2 = &schedule["power"][1];
        assert!(g2["chunk_servers_on"].as_f64() > g1["chunk_servers_on"].as_f64());
    }
    // The seed drives the generated workload: the figures move between seeds.
    let load: Vec<String> = runs
        .iter()
        .map(|r| r["load_traces"][0]["load"].to_string())
        .collect();
    assert!(
        load[0] != load[1] && load[1] != load[2],
        "the seed changes the run"
    );
    // The spread: the gears' accuracy over the three seeds, its range the runs' own.
    let rows = all["spread"].as_array().unwrap();
    let gears = rows
        .iter()
        .find(|r| r["key"].as_str().unwrap().ends_with("gears_correct_6_days"))
        .expect("a spread row for the gears' accuracy");
    assert_eq!(gears["seeds"], serde_json::json!([7, 8, 9]));
    let values: Vec<f64> = gears["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(gears["min"].as_f64().unwrap(), min);
    assert!(min >= 90.0, "{gears}");
    let test_hours = runs[0]["load_traces"][0]["prediction"][5]["test_hours"]
        .as_f64()
        .unwrap();
    assert!(
        (values[0] - 100.0 * correct_by_seed[0] as f64 / test_hours).abs() < 1e-9,
        "{gears}"
    );
    let text = std::fs::read_to_string(dir.path().join("spread.csv")).unwrap();
    assert_eq!(text.lines().count(), rows.len() + 1, "{text}");
    for seed in [7, 8, 9] {
        for file in [
            "report.json",
            "figure1_load.csv",
            "figure2_utilization_cdf.csv",
            "figure8_prediction.csv",
            "figure9_oracle.csv",
            "figure9_power.csv",
            "figure10_schedule.csv",
            "figure1_load.svg",
            "figure8_prediction_error.svg",
        ] {
            let path = dir.path().join(format!("seed-{seed}")).join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.len() > 50, "{} holds something", path.display());
            if file.ends_with(".csv") {
                // Trace names hold commas ("hotmail-like, 7 days"): quoted, so every row has
                // the header's fields.
                let fields = |line: &str| {
                    let mut quoted = false;
                    1 + line
                        .chars()
                        .filter(|&c| {
                            if c == '"' {
                                quoted = !quoted;
                            }
                            c == ',' && !quoted
                        })
                        .count()
                };
                let mut lines = text.lines();
                let header = fields(lines.next().unwrap());
                for line in lines {
                    assert_eq!(fields(line), header, "{}: {line}", path.display());
                }
            }
        }
    }
}

#[test]
fn lab_sierra_refuses_bad_flags() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(["lab", "sierra"])
            .args(args)
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(run(&["--g-min", "0"]).contains("g-min 0"));
    assert!(run(&["--maintenance-hours", "24"]).contains("not an hour"));
    assert!(run(&["--week-days", "1"]).contains("week-days"));
    assert!(run(&["--io-rate-scale", "0"]).contains("rate-scale"));
    assert!(run(&["--reclaim-jobs", "0"]).contains("reclaim-jobs"));
    assert!(run(&["--experiments", "sideways"]).contains("not one of"));
    assert!(run(&["--g-min", "1", "--testbed-g-min", "2"]).contains("testbed-g-min"));
    assert!(run(&["--rebuild-gb", "0"]).contains("rebuild-gb"));
    assert!(run(&["--seeds", "0"]).contains("--seeds"));
    assert!(run(&["--seed", &u64::MAX.to_string(), "--seeds", "2"]).contains("overflow"));
    assert!(run(&["--log-size", "12Q"]).contains("bad size unit"));
    let small = [
        "--log-size",
        "1M",
        "--parts",
        "testbed",
        "--experiments",
        "none",
        "--trace",
        "gen:hotmail-like:hours=1,peak_rate=10",
    ];
    assert!(run(&small).contains("too small for the testbed"));
}

/// The testbed (§4.4–4.5) and the microbenchmarks (§4.6) through the real cores, small: the
/// Hotmail-like trace at a fiftieth of its rate (so a few chunk servers are provisioned; at a
/// twentieth the run took 172 s of the 240 s limit alone and was ended under CI's load), a
/// minute of state before each window, Table 5 for a second, Figure 12 on 0.2 GB. Every
/// request answered; the up-shift reclaims everything logged; the down-shift migrates
/// primaries; rebuilding onto two servers is faster than onto one.
#[test]
fn lab_sierra_testbed_and_microbenchmarks_small() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(["lab", "sierra", "--parts", "testbed,micro"])
        // A two-hundredth of the trace's rate: thousands of requests a window, and the
        // simulated cluster's own traffic (heartbeats, leases, load reports) no less.
        .args(["--io-rate-scale", "0.005", "--preface-s", "60"])
        .args([
            "--table5-seconds",
            "1",
            "--rebuild-gb",
            "0.2",
            "--rebuild-servers",
            "2",
        ])
        .args(["--json", "--out"])
        .arg(dir.path())
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tb = &json["testbed"][0];
    let experiments = tb["experiments"].as_array().unwrap();
    let names: Vec<&str> = experiments
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["steady", "up-shift", "down-shift"]);
    // Each window says whether it touches the maintenance hours (0 and 1 of each day; at this
    // rate the gears change only around them, so the shifts fall back to them).
    assert_eq!(tb["maintenance_hours"], serde_json::json!([0, 1]));
    for e in experiments {
        let from = e["from_s"].as_u64().unwrap();
        let to = e["to_s"].as_u64().unwrap();
        let touches = (from..to).step_by(60).any(|t| (t / 3600) % 24 < 2);
        assert_eq!(
            e["in_maintenance"], touches,
            "{} window {from}..{to} s",
            e["name"]
        );
    }
    let run = |name: &str, config: &str| {
        experiments
            .iter()
            .find(|e| e["name"] == name)
            .and_then(|e| {
                e["runs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["config"] == config)
            })
            .cloned()
            .unwrap()
    };
    for e in experiments {
        for r in e["runs"].as_array().unwrap() {
            assert_eq!(r["failed"], 0, "{}", e["name"]);
            assert!(r["requests"].as_u64().unwrap() > 1000, "{r}");
        }
    }
    let up = run("up-shift", "sierra");
    println!("up-shift on sierra: {up}");
    assert!(up["reclaimed_bytes"].as_u64().unwrap() > 0, "{up}");
    assert_eq!(up["logged_bytes_at_end"], 0, "everything reclaimed: {up}");
    // The up-shift's parts add up to the window, the shift cutting it.
    let phases = up["phases"].as_array().unwrap();
    assert!(phases.len() >= 2, "{phases:?}");
    assert_eq!(phases[0]["phase"], "before the shift");
    let counted: u64 = phases
        .iter()
        .map(|p| p["latency"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, up["requests"].as_u64().unwrap(), "{phases:?}");
    assert!(
        phases.windows(2).all(|w| w[0]["to_s"] == w[1]["from_s"]),
        "{phases:?}"
    );
    let down = run("down-shift", "sierra");
    assert!(down["migrations"].as_u64().unwrap() > 0, "{down}");
    assert_eq!(run("steady", "baseline")["loggers"], 0);
    assert!(tb["need"]["logged_bytes_total"].as_u64().unwrap() > 0);
    let micro = &json["micro"];
    let t5 = micro["table5"].as_array().unwrap();
    assert_eq!(t5.len(), 4);
    for row in t5 {
        assert!(row["aggregate"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["failed"], 0, "{row}");
    }
    let f12 = micro["figure12"].as_array().unwrap();
    assert_eq!(f12.len(), 4, "k = 1, 2 for 1 MB and 64 MB chunks");
    let rate = |i: usize| f12[i]["mb_per_s"].as_f64().unwrap();
    println!(
        "rebuild 1 MB chunks: {:.1} MB/s onto 1, {:.1} onto 2",
        rate(0),
        rate(1)
    );
    assert!(rate(1) > rate(0), "{f12:?}");
    for file in [
        "figure11_testbed.csv",
        "table2_reclaim_need.csv",
        "table5.csv",
        "figure12_rebuild.csv",
    ] {
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        assert!(text.lines().count() > 1, "{file} holds rows");
    }
}

/// `--experiments none`: Table 2's reclaim need from one pass over the trace, no window run.
/// What the loggers must hold (unique bytes) is at most what they take in below the top gear,
/// which is at most what the trace writes.
#[test]
fn lab_sierra_reclaim_need_alone() {
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args([
            "lab",
            "sierra",
            "--parts",
            "testbed",
            "--experiments",
            "none",
        ])
        .args(["--io-rate-scale", "0.05", "--json"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tb = &json["testbed"][0];
    assert_eq!(tb["experiments"].as_array().unwrap().len(), 0);
    let need = &tb["need"];
    let bytes = |k: &str| need[k].as_u64().unwrap();
    println!("{need}");
    assert!(bytes("logged_bytes_total") > 0, "{need}");
    assert!(
        bytes("logged_bytes_total") <= bytes("written_bytes_total"),
        "{need}"
    );
    assert!(
        bytes("written_bytes_total") < bytes("trace_written_bytes"),
        "{need}"
    );
    assert!(bytes("trace_read_bytes") > 0, "{need}");
}

/// Table 5's streaming reads changed one respect at a time (`--table5-causes`): a row per
/// variant, in the report, its JSON and its CSV; one client alone is one client; what the
/// experiment found holds at this length too (a larger read-ahead, a cut-through network and
/// a second read outstanding each raise the figure; a cut-through network shortens a cached
/// read's round trip).
#[test]
fn lab_sierra_table5_causes() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(["lab", "sierra", "--parts", "micro", "--table5-causes"])
        .args([
            "--table5-seconds",
            "3",
            "--rebuild-gb",
            "0.1",
            "--rebuild-servers",
            "1",
        ])
        .args(["--json", "--out"])
        .arg(dir.path())
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let causes = json["micro"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 9, "{causes:?}");
    let row = |variant: &str| {
        causes
            .iter()
            .find(|c| c["variant"] == variant)
            .unwrap_or_else(|| panic!("{variant} in {causes:?}"))
    };
    let rate = |variant: &str| row(variant)["aggregate"].as_f64().unwrap();
    let preset = rate("as measured (the preset)");
    let table5_reads = json["micro"]["table5"][1]["aggregate"].as_f64().unwrap();
    assert_eq!(
        preset, table5_reads,
        "the first variant is Table 5's own row"
    );
    for variant in [
        "read-ahead 1 MiB",
        "cut-through network",
        "2 reads outstanding per client",
    ] {
        assert!(
            rate(variant) > preset,
            "{variant}: {} against {preset}",
            rate(variant)
        );
    }
    let alone = row("one client alone");
    assert_eq!(alone["setup"]["clients"], 1);
    assert_eq!(alone["per_client_min"], alone["per_client_max"]);
    let median = |variant: &str| row(variant)["median_ms"].as_f64().unwrap();
    assert!(median("cut-through network") < median("as measured (the preset)"));
    let text = std::fs::read_to_string(dir.path().join("table5_causes.csv")).unwrap();
    assert_eq!(text.lines().count(), 10, "{text}");
}

/// The measured power run (Figure 9 right) at its smallest, without the window experiments:
/// the first three hours of a day (the two maintenance hours, then an hour of the night's
/// trough) at a hundredth of the rate, every request
/// replayed on Sierra, on the baseline of as many servers and on N chunk servers always on.
/// Sierra, with its standby, spends less than either baseline and fails nothing.
#[test]
fn lab_sierra_power_run_small() {
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args([
            "lab",
            "sierra",
            "--parts",
            "testbed",
            "--experiments",
            "none",
        ])
        .args(["--power-run", "--power-sample", "1"])
        .args(["--trace", "gen:hotmail-like:hours=3,peak_rate=10"])
        .args(["--maintenance-hours", "0,1", "--preface-s", "60"])
        .args(["--quiet", "--json"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let power = json["testbed"][0]["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "power")
        .expect("a power run")
        .clone();
    let run = |config: &str| {
        power["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["config"] == config)
            .unwrap_or_else(|| panic!("no {config} run: {power}"))
            .clone()
    };
    let (sierra, baseline, n) = (run("sierra"), run("baseline"), run("baseline-n"));
    assert_eq!(n["servers"], sierra["servers"], "{n}");
    assert_eq!(n["loggers"], 0);
    assert_eq!(
        baseline["servers"].as_u64().unwrap(),
        sierra["servers"].as_u64().unwrap() + sierra["loggers"].as_u64().unwrap()
    );
    for r in [&sierra, &baseline, &n] {
        assert_eq!(r["failed"], 0, "{r}");
        assert_eq!(r["sample"], 1, "every request: {r}");
        assert_eq!(r["requests"], sierra["requests"], "the same requests: {r}");
    }
    let e = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap();
    assert!(e(&sierra, "asleep_fraction") > 0.0, "{sierra}");
    assert!(
        e(&sierra, "energy_j") < e(&baseline, "energy_j"),
        "{sierra} {baseline}"
    );
    assert!(
        e(&sierra, "chunk_server_energy_j") < e(&n, "chunk_server_energy_j"),
        "{sierra} {n}"
    );
}

/// The MSR Cambridge fragments (several volumes merged on their clock), as the paper's
/// "Cambridge" load: the analysis runs and says what it found.
#[test]
fn lab_sierra_on_the_msr_fragments() {
    let Some(dir) = cordillera_testkit::traces_dir("lab_sierra_on_the_msr_fragments") else {
        return;
    };
    let msr = dir.join("msr");
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        // The parts read from the traces alone (the testbed's replay has its own tests).
        .args(["lab", "sierra", "--json", "--parts", "analysis,predictors"])
        .arg("--trace")
        .arg(msr.join("rsrch_1.full.csv"))
        .arg("--trace")
        .arg(msr.join("wdev_1.full.csv"))
        .arg("--trace")
        .arg(msr.join("hm_1.writes_subset.csv"))
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["load_traces"][0]["records"], 13_780 + 1_055 + 13_069);
    assert!(json["load_traces"][0]["whole_days"].as_u64().unwrap() >= 3);
    assert!(json["schedules"][0]["hours"].as_array().unwrap().len() > 24 * 3);
}

/// The mean over seeds of figure `key` in a `--json` report's `spread`.
fn spread_mean(json: &serde_json::Value, key: &str) -> f64 {
    json["spread"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no {key}"))["mean"]
        .as_f64()
        .unwrap()
}

/// `lab striping` on one and two arrays over two seeds: the paper's shapes of Figure 2 (wide
/// helps large requests and hurts small ones beside them; with ON periods synchronized across
/// arrays the two are within about 10 %), the seed changes the run, and bad flags are refused.
#[test]
fn lab_striping_figure_2_small() {
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: &str, seeds: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(["lab", "striping", "--arrays", "1,2", "--duration-s", "150"])
            .args(["--figures", "2a,2b"])
            .args(["--seed", seed, "--seeds", seeds, "--json", "--out"])
            .arg(dir.path())
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let json = run("1", "2");
    assert_eq!(json["seeds"], serde_json::json!([1, 2]));
    let mean = |key: &str| spread_mean(&json, key);
    for series in ["large, independent", "small, synchronized", "pair large"] {
        let one = mean(&format!(
            "fig{}/{series}/1",
            if series.starts_with("pair") {
                "2b"
            } else {
                "2a"
            }
        ));
        assert!(
            (one - 1.0).abs() < 1e-9,
            "one array: narrow is wide ({series}: {one})"
        );
    }
    let large_sync = mean("fig2a/large, synchronized/2");
    let small_sync = mean("fig2a/small, synchronized/2");
    assert!((0.85..1.0).contains(&large_sync), "{large_sync}");
    assert!((1.0..1.2).contains(&small_sync), "{small_sync}");
    assert!(mean("fig2b/pair large/2") < 0.97);
    assert!(mean("fig2b/pair small/2") > 1.1);
    let csv = std::fs::read_to_string(dir.path().join("points.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 2 * 6, "{csv}");
    // Figure 5 on two arrays: as the large requests grow, wide striping gains for them and
    // loses for the small requests beside them (interference, §3.2.2).
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args([
            "lab",
            "striping",
            "--arrays",
            "2",
            "--figures",
            "5",
            "--duration-s",
            "150",
            "--json",
        ])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let five: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let point = |series: &str, x: f64| {
        five["runs"][0]["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["series"] == series && p["x"].as_f64() == Some(x))
            .unwrap_or_else(|| panic!("{series} at {x}"))["ratio"]
            .as_f64()
            .unwrap()
    };
    assert!(point("pair large", 1.0) > point("pair large", 32.0) + 0.1);
    assert!(point("pair small", 1.0) + 0.1 < point("pair small", 32.0));
    // Another seed, another run.
    let other = run("7", "1");
    let ratio = |j: &serde_json::Value| j["runs"][0]["points"][6]["ratio"].as_f64().unwrap();
    assert_ne!(ratio(&json), ratio(&other));
    // Each modelling switch changes Figure 2(b) on two arrays, and the report names it.
    let figure_2b = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(["lab", "striping", "--arrays", "2", "--figures", "2b"])
            .args(["--duration-s", "150", "--json", "--quiet"])
            .args(extra)
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            j["runs"][0]["points"][1]["ratio"].as_f64().unwrap(),
            j["model"].clone(),
        )
    };
    let (plain, model) = figure_2b(&[]);
    assert_eq!(model["queue"], "Sptf", "{model}");
    for (flag, value, field, shown) in [
        ("--disk-queue", "fcfs", "queue", "Fcfs"),
        ("--utilization-of", "array-on", "utilization_of", "ArrayOn"),
        ("--store-mib", "1024", "store_bytes", "1073741824"),
        ("--sizes", "fixed", "sizes", "Fixed"),
        ("--mean-on-s", "0.1", "", ""),
    ] {
        let (small, model) = figure_2b(&[flag, value]);
        assert_ne!(small, plain, "{flag} {value} changed nothing");
        if !field.is_empty() {
            assert_eq!(model[field].to_string().trim_matches('"'), shown, "{model}");
        }
    }
    for bad in [
        vec!["--arrays", "0"],
        vec!["--utilization", "1.5"],
        vec!["--duration-s", "1"],
        vec!["--seeds", "0"],
        vec!["--figures", "9"],
        vec!["--wide-layout", "diagonal"],
        vec!["--disk-queue", "lifo"],
        vec!["--utilization-of", "peak"],
        vec!["--store-mib", "1"],
        vec!["--sizes", "uniform"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(["lab", "striping"])
            .args(&bad)
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(!out.status.success(), "{bad:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--") || err.contains("invalid"),
            "{bad:?}: {err}"
        );
    }
}

/// Figures 8–10 and Table 3 through the command: Table 2's streams (WebSearch from the real
/// fragment when `../shared/traces` is present) on four arrays; the outputs a reader plots.
#[test]
fn lab_striping_figures_8_to_10_and_table_3_small() {
    let dir = tempfile::tempdir().unwrap();
    let traces = cordillera_testkit::traces_dir("lab striping on the real WebSearch fragment");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordillera"));
    cmd.args(["lab", "striping", "--figures", "8,10,table3"])
        .args(["--duration-s", "300", "--seeds", "2", "--json", "--out"])
        .arg(dir.path());
    match &traces {
        Some(t) => {
            cmd.arg("--websearch")
                .arg(t.join("umass/umass_websearch_small.mqsim.trace"));
        }
        None => println!("WebSearch generated from Table 2 instead"),
    }
    let out = cmd.output_within(COMMAND_LIMIT).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mean = |key: &str| spread_mean(&json, key);
    // Figure 9: wide spreads load alike over the arrays; narrow's arrays, balanced by mean
    // load, differ at their busy moments.
    let (narrow, wide) = (mean("fig9/narrow/p90_spread"), mean("fig9/wide/p90_spread"));
    assert!(wide < 0.05 && narrow > 2.0 * wide, "{narrow} vs {wide}");
    // Figure 10: the quiet array's streams do better narrow.
    assert!(mean("fig10/array2") > 1.0);
    assert!(mean("fig10/quiet_array_utilization") < 0.3);
    // Table 3: OLTP gains wide beside small sequential requests, not beside 7 MB ones; through
    // the adapter's 40 MB/s paths, the sequential reader does better narrow at 896 KB and wide
    // at 7 MB (both paths at once), as on the testbed.
    assert!(mean("table3/896 KB/oltp_ratio") > mean("table3/7 MB/oltp_ratio"));
    assert!(mean("table3/896 KB/sequential_ratio") < 1.0);
    assert!(mean("table3/7 MB/sequential_ratio") > 1.0);
    let report = &json["skew"][0]["report"];
    assert_eq!(report["streams"].as_array().unwrap().len(), 52);
    assert_eq!(report["dropped"].as_array().unwrap().len(), 9);
    let streams = std::fs::read_to_string(dir.path().join("streams.csv")).unwrap();
    // Two seeds, two figures, 52 streams each.
    assert_eq!(streams.lines().count(), 1 + 2 * 2 * 52);
    let cdf = std::fs::read_to_string(dir.path().join("utilization_cdf.csv")).unwrap();
    assert_eq!(cdf.lines().count(), 1 + 2 * 2 * 2 * 4);
    for svg in [
        "figure_8_mean.svg",
        "figure_9_narrow.svg",
        "figure_10.svg",
        "table_3_oltp.svg",
    ] {
        let text = std::fs::read_to_string(dir.path().join(svg)).unwrap();
        assert!(text.contains("<svg") && text.contains("</svg>"), "{svg}");
    }
    // Another seed draws other streams.
    assert_ne!(
        json["skew"][0]["report"]["streams"],
        json["skew"][2]["report"]["streams"]
    );
}

/// Figures 8–9 on real load variation: the recorded fragments' volumes as streams, no file
/// played faster than recorded, together carrying Table 2's load; wide striping absorbs their
/// bursts (the paper's Figures 8–9 in direction).
#[test]
fn lab_striping_figures_8_and_9_on_the_recorded_fragments() {
    let Some(traces) = cordillera_testkit::traces_dir("lab striping --fragments") else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(["lab", "striping", "--figures", "8", "--fragments"])
        .arg(&traces)
        .args(["--duration-s", "600", "--seeds", "2", "--json", "--quiet"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = json["fragments"].as_array().unwrap();
    assert!(files.len() >= 8, "{files:?}");
    let mut carried = 0.0;
    for f in files {
        let speed = f["speed"].as_f64().unwrap();
        assert!(speed > 0.0 && speed <= 1.0, "{f}");
        carried += speed * f["recorded_weighted_iops"].as_f64().unwrap();
    }
    // Table 2's 1,362.6 write-weighted IOPS (its five traces' reads + 4 × writes).
    assert!((carried - 1362.6).abs() < 1.0, "{carried}");
    let report = &json["skew"][0]["report"];
    let dropped: Vec<&str> = report["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(dropped.contains(&"rsrch_1/rsrch_1"), "{dropped:?}");
    assert!(report["streams"].as_array().unwrap().len() >= 16);
    let mean = |key: &str| spread_mean(&json, key);
    let (narrow, wide) = (mean("fig9/narrow/p90_spread"), mean("fig9/wide/p90_spread"));
    assert!(narrow > 3.0 * wide, "{narrow} vs {wide}");
    assert!(mean("fig8/geomean_mean") < 0.9);
    assert!(mean("fig8/comparable_or_better_mean") > 0.5);
    assert_ne!(
        json["skew"][0]["report"]["streams"], json["skew"][1]["report"]["streams"],
        "each seed starts the files at other phases"
    );
}

/// `--seed` drives the workload too (gen:bursty draws its peaks' places from it), `--seeds K`
/// reports every figure over the K runs, and no episode cuts its peak (they are centred on it).
#[test]
fn lab_everest_over_seeds_moves_the_workload_and_never_cuts_a_peak() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(["lab", "everest", "--trace"])
        .arg("gen:bursty:duration_s=1800,peaks=2,peak_s=60,volumes=3")
        .args([
            "--segment-s",
            "300",
            "--rate-window-s",
            "10",
            "--episodes",
            "2",
        ])
        .args([
            "--main-only",
            "--seeds",
            "3",
            "--seed",
            "4",
            "--json",
            "--out",
        ])
        .arg(dir.path())
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("seed 6: episode 2: peak off-load"),
        "progress reaches standard error when it is not a terminal:\n{stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["seeds"], serde_json::json!([4, 5, 6]));
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let mut peaks = Vec::new();
    for run in runs {
        assert!(run["source"]
            .as_str()
            .unwrap()
            .ends_with(&format!("seed={}", run["seed"])));
        for e in run["episodes"].as_array().unwrap() {
            assert_eq!(e["peak_whole"], true, "{e}");
            let (start, end) = (e["start_s"].as_f64().unwrap(), e["end_s"].as_f64().unwrap());
            let (p0, p1) = (
                e["peak_start_s"].as_f64().unwrap(),
                e["peak_end_s"].as_f64().unwrap(),
            );
            assert!(
                start <= p0 && p1 <= end + 1.0,
                "{start}–{end} holds {p0}–{p1}"
            );
            peaks.push(p0 as i64);
        }
    }
    peaks.sort_unstable();
    peaks.dedup();
    assert!(
        peaks.len() > 2,
        "the seeds place their peaks differently: {peaks:?}"
    );
    let spread = json["spread"].as_array().unwrap();
    let row = spread
        .iter()
        .find(|r| r["key"] == "episode1/baseline/mean_ms")
        .expect("episode 1's baseline mean over the seeds");
    assert_eq!(row["values"].as_array().unwrap().len(), 3);
    let (min, max) = (row["min"].as_f64().unwrap(), row["max"].as_f64().unwrap());
    assert!(min < max, "the runs differ: {row}");
    for file in [
        "spread.csv",
        "spread.json",
        "fig5_spread.svg",
        "seed-5/report.json",
    ] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    let svg = std::fs::read_to_string(dir.path().join("fig5_spread.svg")).unwrap();
    assert!(svg.contains("<rect"), "bars drawn");
}

/// Asking for more episodes than the trace holds says so; so does asking for the recovery
/// part when nothing was off-loaded; the largest off-loaded figure is exact, never below what
/// is left at the end.
#[test]
fn lab_everest_says_what_it_could_not_do() {
    // Four episodes asked of a 15-minute trace with one peak.
    let lab = |more: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(["lab", "everest", "--trace"])
            .arg("gen:bursty:duration_s=900,peaks=1,peak_s=60,volumes=3,seed=2")
            .args([
                "--segment-s",
                "300",
                "--rate-window-s",
                "10",
                "--episodes",
                "4",
            ])
            .args(more)
            .output_within(COMMAND_LIMIT)
            .unwrap()
    };
    let out = lab(&["--parts", "recovery", "--json", "--quiet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "--quiet: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let episodes = json["episodes"].as_array().unwrap();
    assert!(episodes.len() < 4);
    let notices: Vec<&str> = json["notices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notices.iter().any(|n| n.contains("4 episodes asked for")),
        "{notices:?}"
    );
    assert!(
        json["recovery"].is_object() || notices.iter().any(|n| n.contains("no recovery run")),
        "Table 3 or the reason it is missing: {notices:?}"
    );
    for e in episodes {
        for config in ["always", "peak"] {
            let c = &e["configs"][config];
            let (max, end) = (
                c["offloaded_max_bytes"].as_u64().unwrap(),
                c["offloaded_at_end_bytes"].as_u64().unwrap(),
            );
            assert!(
                max >= end,
                "{config}: largest {max} < left at the end {end}"
            );
        }
    }
    assert!(
        json["episodes"][0]["configs"]["always"]["offloaded_max_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    // The text says the same.
    let text = lab(&["--main-only", "--quiet"]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("notice: 4 episodes asked for"), "{stdout}");
}

/// `lab bonfire --seeds 2`: each seed draws its own trace; Table 3's figures come with their
/// spread over the seeds and the paper's value beside them.
#[test]
fn lab_bonfire_over_two_seeds_reports_the_spread() {
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(["lab", "bonfire", "--days", "3", "--cache-pct", "25,100"])
        .args(["--warmup-pct", "5,25", "--region", "1m", "--th-v", "0.9"])
        .args([
            "--th-n", "0.05", "--parts", "days", "--seeds", "2", "--json", "--quiet",
        ])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["seeds"], serde_json::json!([1, 2]));
    let sources: Vec<&str> = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["days"]["source"].as_str().unwrap())
        .collect();
    assert_eq!(
        sources,
        ["gen:reaccess:days=3,seed=1", "gen:reaccess:days=3,seed=2"]
    );
    let row = json["spread"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "table3/cache100/warmup25/thv90/thn5/converge_improvement_pct")
        .expect("Table 3's first row");
    assert_eq!(row["values"].as_array().unwrap().len(), 2);
    assert_eq!(row["paper"], "76");
    assert!(
        row["min"].as_f64() < row["max"].as_f64(),
        "the seeds differ: {row}"
    );
}
