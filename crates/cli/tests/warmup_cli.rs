//! `cordillera warmup simulate` as a process: its JSON counts equal the library's LRU run on
//! the same generated workload, and bad input is a clear error.

use cordillera_testkit::process::{Bounded, COMMAND_LIMIT};
use std::process::Command;

use cordillera_trace::read::RecordReader;
use cordillera_warmup::cache::Lru;
use cordillera_warmup::sim::simulate;

const BIN: &str = env!("CARGO_BIN_EXE_cordillera");
const SPEC: &str = "gen:zipf:count=50000,alpha=1.1,span=256m";

#[test]
fn simulate_prints_the_librarys_lru_counts() {
    let out = Command::new(BIN)
        .args(["warmup", "simulate", SPEC, "--cache-size", "4m", "--json"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let mut reader = cordillera_sim::workload::open_spec(SPEC).unwrap();
    let mut records = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        records.push(r);
    }
    let counts = simulate(&mut Lru::new(1024), records);
    assert_eq!(v["cache_blocks"], 1024);
    assert_eq!(v["policy"], "lru");
    assert_eq!(v["requests"], 50_000);
    assert_eq!(v["read_block_accesses"], counts.read_block_accesses);
    assert_eq!(v["read_block_hits"], counts.read_block_hits);
    assert!(counts.read_block_hits > 0 && counts.read_block_hits < counts.read_block_accesses);
}

#[test]
fn a_bad_policy_or_size_is_a_clear_error() {
    for (policy, size, expected) in [
        ("lirs", "4m", "unknown cache policy"),
        ("lru", "lots", "bad size"),
        ("lru", "20000g", "over the simulator's limit"),
    ] {
        let out = Command::new(BIN)
            .args([
                "warmup",
                "simulate",
                SPEC,
                "--policy",
                policy,
                "--cache-size",
                size,
            ])
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{policy} {size}: {err}");
    }
}

#[test]
fn schemes_show_a_warmed_cache_ahead_of_a_cold_one_on_a_skewed_workload() {
    let out = Command::new(BIN)
        .args([
            "warmup",
            "schemes",
            SPEC,
            "--axis",
            "requests",
            "--interval",
            "2500",
            "--cache-size",
            "25%",
            "--warmup-size",
            "25%",
            "--region",
            "4k",
            "--json",
            "--preload-device",
            "cheetah-15k",
        ])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["requests"], 50_000);
    // Half-way between the first request (0) and the last (49,999) by default.
    assert_eq!(v["start"], 24_999.0);
    let intervals = v["intervals"].as_array().unwrap();
    assert_eq!(
        intervals.len(),
        11,
        "25,001 requests from T, 2,500 an interval"
    );
    let rate = |i: usize, scheme: usize| intervals[i][scheme].as_f64().unwrap();
    // In the first interval after T: always-warm and warmed ahead of cold.
    assert!(
        rate(0, 0) > rate(0, 1) && rate(0, 2) > rate(0, 1),
        "{:?}",
        intervals[0]
    );
    let schemes = v["schemes"].as_array().unwrap();
    let (cold, warmed) = (&schemes[1], &schemes[2]);
    assert!(
        warmed["converge"].as_f64() <= cold["converge"].as_f64(),
        "{v}"
    );
    assert!(
        warmed["server_load_reduction"].as_f64() >= cold["server_load_reduction"].as_f64(),
        "{v}"
    );
    // A working set of 25 % is what was loaded (4 KiB regions: exactly the block count).
    let wss = v["working_set_blocks"].as_u64().unwrap();
    let loaded = v["warmup_blocks"].as_u64().unwrap();
    assert!(loaded <= wss.div_ceil(4) && loaded > 0, "{loaded} of {wss}");
    // Scattered 4 KiB blocks: reading them in place seeks for each run; a snapshot streams.
    let in_place = v["preload_metadata_only_s"].as_f64().unwrap();
    let snapshot = v["preload_snapshot_s"].as_f64().unwrap();
    assert!(
        snapshot > 0.0 && in_place > 2.0 * snapshot,
        "{in_place} s against {snapshot} s"
    );
}

#[test]
fn schemes_run_on_the_time_axis_and_refuse_an_empty_interval() {
    let out = Command::new(BIN)
        .args(["warmup", "schemes", SPEC, "--axis", "time"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    // The generated Zipf workload has timestamps: it runs on the time axis.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(BIN)
        .args(["warmup", "schemes", SPEC, "--interval", "0"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interval must be positive"));
}

/// Out-of-range flags are errors that say why (issue 25): an empty cache, a warm-up larger
/// than the cache, new caches after the trace's end.
#[test]
fn schemes_refuse_an_empty_cache_an_oversized_warmup_and_a_start_past_the_end() {
    for (args, expected) in [
        (vec!["--cache-size", "0"], "less than one 4 KiB block"),
        (
            vec!["--cache-size", "50%", "--warmup-size", "200%"],
            "more than the cache holds",
        ),
        (
            vec!["--axis", "requests", "--start", "1e12"],
            "past the trace's end",
        ),
    ] {
        let out = Command::new(BIN)
            .args(["warmup", "schemes", SPEC])
            .args(&args)
            .output_within(COMMAND_LIMIT)
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// A scheme that never converges within the trace is reported as such: `null` in JSON and
/// "never" in the text, not as a time (issue 25: it printed the trace's length).
#[test]
fn schemes_report_never_converged_as_null_not_a_time() {
    let args = [
        "warmup",
        "schemes",
        SPEC,
        "--cache-size",
        "100%",
        "--th-v",
        "0.99",
        "--th-n",
        "0",
    ];
    let out = Command::new(BIN)
        .args(args)
        .arg("--json")
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cold = &v["schemes"][1];
    assert_eq!(cold["name"], "cold");
    assert!(cold["converge"].is_null(), "{cold}");
    assert!(cold["converge_intervals"].is_null(), "{cold}");
    assert!(v["converge_improvement_percent"].is_null());
    assert!(cold["server_load_reduction"].as_f64().is_some());
    let text = Command::new(BIN)
        .args(args)
        .output_within(COMMAND_LIMIT)
        .unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("cold never"), "{stdout}");
}

/// `warmup schemes` streams its trace (issue 25): three passes, holding the working set's
/// blocks, the history window and the caches, not the records. Its figures equal the
/// library's schemes over the trace held in memory, and it refuses standard input, which it
/// could not read three times.
#[test]
fn schemes_streamed_equal_the_schemes_over_the_trace_in_memory() {
    use cordillera_warmup::algorithms::{self, Algorithm};
    use cordillera_warmup::schemes::{self, Timeline};
    use cordillera_warmup::sim::BLOCK_BYTES;

    let spec = "gen:reaccess:days=2,volumes=2,rate=0.05";
    let out = Command::new(BIN)
        .args(["warmup", "schemes", spec, "--json", "--history", "3600"])
        .args([
            "--algorithm",
            "top-k",
            "--region",
            "4k",
            "--cache-size",
            "30%",
        ])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let mut reader = cordillera_sim::workload::open_spec(spec).unwrap();
    let mut records = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        records.push(r);
    }
    let first = records.iter().map(|r| r.time_ns).min().unwrap();
    let last = records.iter().map(|r| r.time_ns).max().unwrap();
    let start_ns = first + (last - first) / 2;
    let wss = algorithms::working_set_blocks(&records);
    let cache = (wss as f64 * 0.3).round() as usize;
    let warmup = (wss as f64 * 0.1).round() as u64;
    let history: Vec<_> = records
        .iter()
        .filter(|r| r.time_ns >= start_ns - 3_600_000_000_000 && r.time_ns < start_ns)
        .copied()
        .collect();
    let preload = algorithms::select(&history, Algorithm::TopK, 4096, warmup * BLOCK_BYTES, 1);
    let timeline = Timeline {
        start_ns,
        interval_ns: 600_000_000_000,
        readahead_bytes: 0,
    };
    let [always, cold, warmed] =
        schemes::run_three(records, timeline, &preload, || Lru::new(cache));
    assert_eq!(got["working_set_blocks"], wss);
    assert_eq!(got["cache_blocks"], cache as u64);
    assert_eq!(got["warmup_blocks"], preload.len() as u64);
    let intervals = got["intervals"].as_array().unwrap();
    assert_eq!(intervals.len(), always.len());
    assert!(always.len() > 50, "{} intervals", always.len());
    for (i, row) in intervals.iter().enumerate() {
        for (k, series) in [&always, &cold, &warmed].iter().enumerate() {
            // JSON's decimal text: equal to the last bit or two.
            let (a, b) = (row[k].as_f64(), series[i].hit_rate());
            assert!(
                a.is_some() == b.is_some() && (a.unwrap_or(0.0) - b.unwrap_or(0.0)).abs() < 1e-12,
                "interval {i}, scheme {k}: {a:?} against {b:?}"
            );
        }
    }
    let warmed_t = schemes::convergence(&warmed, &always, 0.8, 0.03);
    assert_eq!(
        got["schemes"][2]["converge_intervals"].as_u64(),
        warmed_t.map(|t| t as u64)
    );

    let out = Command::new(BIN)
        .args(["warmup", "schemes", "-"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("standard input can be read only once"),
        "{err}"
    );
}

/// `--seeds K` runs K seeds — each its own generated workload and Random-K — and reports each
/// figure's spread; `--seeds 0` is refused.
#[test]
fn schemes_over_seeds_report_the_spread() {
    let out = Command::new(BIN)
        .args([
            "warmup",
            "schemes",
            "gen:reaccess:days=2,volumes=2,rate=0.05",
        ])
        .args(["--algorithm", "random-k", "--seeds", "3", "--json"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["seeds"], serde_json::json!([1, 2, 3]));
    assert_eq!(json["workload_seeded"], true);
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let sets: std::collections::BTreeSet<String> = runs
        .iter()
        .map(|r| r["working_set_blocks"].to_string())
        .collect();
    assert!(sets.len() > 1, "the seeds drew the same workload: {sets:?}");
    let warmed = json["spread"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "load_reduction/warmed")
        .expect("the warmed cache's load reduction");
    assert_eq!(warmed["values"].as_array().unwrap().len(), 3);
    assert!(warmed["min"].as_f64() <= warmed["mean"].as_f64());
    assert!(warmed["mean"].as_f64() <= warmed["max"].as_f64());

    let out = Command::new(BIN)
        .args(["warmup", "schemes", SPEC, "--seeds", "0"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seeds must be at least 1"));
}
