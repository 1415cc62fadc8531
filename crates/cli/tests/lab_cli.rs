//! `cordillera lab everest` end to end: the documented JSON, the output folder, and the
//! acceptance figure (peak off-load cuts the mean response time of the Exchange-like
//! write-dominated episode at least tenfold).

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
        .output()
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
        &[
            "lab",
            "everest",
            "--segment-s",
            "90",
            "--rate-window-s",
            "60",
        ],
        &["lab", "everest", "--trace", "/nonexistent/trace.csv"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("cordillera: error:"), "{args:?}: {err}");
    }
}
