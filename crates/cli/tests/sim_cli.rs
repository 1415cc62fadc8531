//! `cordillera sim …` end to end.

use cordillera_testkit::process::{Bounded, COMMAND_LIMIT};
use std::process::Command;

fn cordillera(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(args)
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sim_disk_prints_the_documented_fields() {
    let json = cordillera(&[
        "sim",
        "disk",
        "--device",
        "cheetah-15k",
        "--pattern",
        "seq",
        "--rw",
        "write",
        "--bs",
        "64k",
        "--qd",
        "1",
        "--count",
        "2000",
        "--json",
    ]);
    for field in [
        "throughput_mb_per_s",
        "iops",
        "mean_latency_ms",
        "p99_latency_ms",
    ] {
        assert!(json[field].as_f64().unwrap() > 0.0, "{field}");
    }
    let mb = json["throughput_mb_per_s"].as_f64().unwrap();
    let iops = json["iops"].as_f64().unwrap();
    assert!(
        (mb - iops * 65536.0 / 1e6).abs() < 1e-6 * mb,
        "MB/s = IOPS × 64 KiB / 10^6"
    );
    let array = cordillera(&[
        "sim",
        "disk",
        "--device",
        "cheetah-15k",
        "--array",
        "raid0:4",
        "--pattern",
        "rand",
        "--qd",
        "16",
        "--count",
        "2000",
        "--json",
    ]);
    let single = cordillera(&[
        "sim",
        "disk",
        "--device",
        "cheetah-15k",
        "--pattern",
        "rand",
        "--qd",
        "16",
        "--count",
        "2000",
        "--json",
    ]);
    assert!(
        array["iops"].as_f64().unwrap() > 2.0 * single["iops"].as_f64().unwrap(),
        "four spindles serve more"
    );
}

#[test]
fn bad_device_or_array_is_a_clear_error() {
    for args in [
        &["sim", "disk", "--device", "floppy"][..],
        &["sim", "disk", "--array", "raid5:2"],
        &["sim", "disk", "--array", "raid7:4"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(args)
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("error"), "{args:?}: {stderr}");
    }
}

#[test]
fn sim_replay_on_hm_0_gives_sensible_figures() {
    let Some(traces) = cordillera_testkit::traces_dir("sim_replay_on_hm_0_gives_sensible_figures")
    else {
        return;
    };
    let trace = traces.join("msr/hm_0.chunk_148s.csv");
    let trace = trace.to_str().unwrap();
    let json = cordillera(&[
        "sim",
        "replay",
        "--trace",
        trace,
        "--device",
        "cheetah-15k",
        "--array",
        "raid0:4",
        "--json",
    ]);
    assert_eq!(json["records"], 7_016);
    assert_eq!(json["reads"]["count"], 5_820);
    assert_eq!(json["writes"]["count"], 1_196);
    let duration = json["duration_s"].as_f64().unwrap();
    assert!((148.0..160.0).contains(&duration), "{duration}");
    for op in ["reads", "writes"] {
        let s = &json[op];
        let (mean, p50, p99, max) = (
            s["mean_ms"].as_f64().unwrap(),
            s["p50_ms"].as_f64().unwrap(),
            s["p99_ms"].as_f64().unwrap(),
            s["max_ms"].as_f64().unwrap(),
        );
        // At least a transfer, at most the whole run; ordered percentiles.
        assert!(
            p50 > 0.01 && p50 <= p99 && p99 <= max && max < 1000.0 * duration,
            "{op}: {s}"
        );
        assert!(mean > 0.01, "{op}: {s}");
    }
    let utilization = json["utilization"].as_f64().unwrap();
    assert!(utilization > 0.0 && utilization < 1.0, "{utilization}");
    assert!(
        json["recorded_reads"]["count"] == 5_820,
        "the MSR trace's own response times are kept"
    );
    // NVRAM in front absorbs the writes: acknowledged at its 0.05 ms latency.
    let nvram = cordillera(&[
        "sim",
        "replay",
        "--trace",
        trace,
        "--device",
        "cheetah-15k",
        "--nvram",
        "512m:0.5",
        "--json",
    ]);
    assert_eq!(nvram["writes"]["max_ms"].as_f64().unwrap(), 0.05);
    // Four disks serve the burst faster than one.
    let single = cordillera(&[
        "sim",
        "replay",
        "--trace",
        trace,
        "--device",
        "cheetah-15k",
        "--json",
    ]);
    assert!(
        single["reads"]["mean_ms"].as_f64().unwrap() > json["reads"]["mean_ms"].as_f64().unwrap()
    );
}

#[test]
fn calibrate_reports_every_preset() {
    let rows = cordillera(&["sim", "calibrate", "--json"]);
    let rows = rows.as_array().unwrap();
    for preset in [
        "cheetah-15k",
        "fujitsu-maj3182mc",
        "sata-7200",
        "sierra-1tb",
        "ssd",
        "nvme",
    ] {
        assert!(rows.iter().any(|r| r["device"] == preset), "{preset}");
    }
}
