//! `cordillera lab bonfire`'s figures over I/Os: read latency on the Zipf workload
//! (Figure 11) and the trace replayed to the new-cache day (§6.2, Figures 12–15).

use cordillera_testkit::process::{Bounded, COMMAND_LIMIT};
use std::process::Command;

fn lab_bonfire(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(["lab", "bonfire", "--quiet"])
        .args(args)
        .output_within(COMMAND_LIMIT)
        .unwrap()
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Figure 11: a scheme with fewer hits waits longer for its reads; a cache pre-loaded with the
/// whole first half behaves exactly as always-warm (the same hits, the same disk reads).
#[test]
fn zipf_read_latency_follows_the_hit_rate() {
    let dir = tempfile::tempdir().unwrap();
    let out = lab_bonfire(&[
        "--parts",
        "zipf",
        "--zipf-count",
        "200000",
        "--zipf-alpha",
        "1",
        "--json",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let json = json_of(&out);
    let series = json["zipf"]["series"].as_array().unwrap();
    let hit = |i: usize| series[i]["hit_rate"].as_f64().unwrap();
    let ms = |i: usize| series[i]["mean_read_latency_ms"].as_f64().unwrap();
    // always-warm, cold, bonfire 25 / 50 / 75 / 100 %.
    assert!(ms(1) > ms(2) && ms(2) > ms(3), "{series:?}");
    assert!(hit(1) < hit(2) && hit(2) < hit(3));
    assert_eq!(ms(5), ms(0));
    // Misses read from a 7,200 rpm disk: milliseconds; a hit costs the 20 µs given.
    assert!(ms(1) > 0.5 && ms(1) < 20.0, "{}", ms(1));
    assert_eq!(json["zipf"]["hit_us"], 20.0);
    // Per interval, in the CSV and the figure.
    let mut reader = csv::Reader::from_path(dir.path().join("fig10_zipf.csv")).unwrap();
    assert_eq!(
        reader.headers().unwrap(),
        vec!["io", "scheme", "hit_rate", "read_latency_ms"]
    );
    let timed = reader
        .records()
        .map(|r| r.unwrap())
        .filter(|r| !r[3].is_empty())
        .count();
    // 100 intervals over the trace: 50 from the half-way mark, for each of the six schemes.
    assert_eq!(timed, 6 * 50, "timed intervals");
    let svg = std::fs::read_to_string(dir.path().join("fig11_zipf_latency.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("Fig. 11"));
    // A slower hit raises the latency by about the difference (not exactly: the disk turns on
    // while a hit is served, so a miss after it meets the platter elsewhere).
    let slower = json_of(&lab_bonfire(&[
        "--parts",
        "zipf",
        "--zipf-count",
        "200000",
        "--zipf-alpha",
        "1",
        "--hit-us",
        "120",
        "--json",
    ]));
    let later = slower["zipf"]["series"][0]["mean_read_latency_ms"]
        .as_f64()
        .unwrap();
    assert!(
        (later - ms(0) - 0.1).abs() < 0.02,
        "{later} against {}",
        ms(0)
    );
}

/// Figures 12–15 on the default week of gen:reaccess, new caches at day 6: on the nightly-job
/// volume (the paper's web2 has daily reaccesses) cold hits almost nothing of the job while
/// Bonfire's Last-K holds part of it; on the hourly volume (proj1) both converge quickly and
/// Bonfire no later.
#[test]
fn replay_to_day_six_orders_the_schemes_as_the_paper() {
    let dir = tempfile::tempdir().unwrap();
    let out = lab_bonfire(&[
        "--parts",
        "replay",
        "--json",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let json = json_of(&out);
    let r = &json["replay"];
    assert_eq!(r["new_cache_day"], 6);
    let volumes = r["volumes"].as_array().unwrap();
    assert_eq!(volumes.len(), 2);
    for v in volumes {
        let s = v["series"].as_array().unwrap();
        let names: Vec<&str> = s.iter().map(|x| x["scheme"].as_str().unwrap()).collect();
        assert_eq!(names, ["always-warm", "cold", "bonfire"]);
        let hit = |i: usize| s[i]["hit_rate"].as_f64().unwrap();
        let ms = |i: usize| s[i]["mean_read_latency_ms"].as_f64().unwrap();
        assert!(hit(1) < hit(2) && hit(2) <= hit(0) + 0.01, "{v}");
        assert!(ms(1) > ms(2), "{v}");
        let conv = |i: usize| s[i]["converge_after_ios"].as_u64();
        assert!(conv(2).unwrap() <= conv(1).unwrap(), "{v}");
        // Cold and Bonfire have no hit rate before their caches exist; always-warm has.
        let start =
            (v["start_io"].as_u64().unwrap() / v["interval_ios"].as_u64().unwrap()) as usize;
        assert!(start > 10);
        assert!(s[0]["hit_rates"][0].is_number());
        assert!(s[1]["hit_rates"][start - 1].is_null() && s[2]["hit_rates"][start - 1].is_null());
        assert_eq!(v["new_cache_day"], 6);
    }
    let daily = &volumes[1];
    assert_eq!(daily["volume"], "daily");
    let hit = |i: usize| daily["series"][i]["hit_rate"].as_f64().unwrap();
    assert!(
        hit(1) < 0.1 && hit(2) > hit(1) + 0.3 && hit(0) > 0.85,
        "{daily}"
    );
    for file in [
        "replay.csv",
        "replay_hit_rate_hourly.svg",
        "replay_latency_daily.svg",
    ] {
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        assert!(text.lines().count() > 1, "{file}");
    }
    let mut reader = csv::Reader::from_path(dir.path().join("replay.csv")).unwrap();
    assert_eq!(reader.records().count(), 2 * 3 * 100);
}

#[test]
fn replay_refuses_bad_flags_and_says_why_a_trace_cannot_be_replayed() {
    let refused = |args: &[&str], why: &str| {
        let out = lab_bonfire(args);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{args:?}: {err}");
    };
    refused(&["--parts", "replay", "--replay-day", "1"], "day before");
    refused(
        &[
            "--parts",
            "replay",
            "--replay-warmup-pct",
            "80",
            "--replay-cache-pct",
            "50",
        ],
        "no larger than the cache",
    );
    refused(&["--parts", "replay", "--hit-us=-1"], "--hit-us");
    refused(
        &["--parts", "replay", "--days", "1"],
        "shorter than two days",
    );
    // A shorter trace: the new caches start on each volume's last day.
    let json = json_of(&lab_bonfire(&[
        "--parts", "replay", "--days", "3", "--json",
    ]));
    assert_eq!(json["replay"]["volumes"][0]["new_cache_day"], 3);
}
