//! `cordillera advise` on careless input, as a new user gives it: each case gets the message
//! it deserves, and no verdict the evidence cannot support. Real traces from
//! `../shared/traces/` (never skipped under CI).

use std::process::{Command, Output};

use cordillera_testkit::process::{Bounded, COMMAND_LIMIT};

fn cordillera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(args)
        .output_within(COMMAND_LIMIT)
        .unwrap()
}

fn advise_json(args: &[&str]) -> (serde_json::Value, String) {
    let mut all = vec!["advise", "--quick", "--quiet", "--json"];
    all.extend_from_slice(args);
    let out = cordillera(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    (
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone(),
        stderr,
    )
}

fn verdict<'a>(report: &'a serde_json::Value, mechanism: &str) -> &'a serde_json::Value {
    report["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["mechanism"] == mechanism)
        .unwrap()
}

fn notes(report: &serde_json::Value) -> String {
    report["characterization"]["reading_notes"].to_string()
}

/// A minute of MSR lines, 10 per second, every `read_every`-th a read.
fn msr_lines(n: u64, read_every: u64) -> String {
    let t0: u64 = 128_166_372_000_000_000;
    (0..n)
        .map(|i| {
            format!(
                "{},db,0,{},{},8192,100\n",
                t0 + i * 1_000_000,
                if i % read_every == 0 { "Read" } else { "Write" },
                (i * 104_729 % 90_000) * 4096
            )
        })
        .collect()
}

#[test]
fn out_is_checked_before_any_work_and_force_replaces_the_earlier_report() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    std::fs::write(&trace, msr_lines(600, 3)).unwrap();
    let out = dir.path().join("report");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("stale.svg"), "<svg/>").unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let started = std::time::Instant::now();
    let refused = cordillera(&[
        "advise",
        trace.to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("not empty") && message.contains("--force"),
        "{message}"
    );
    assert!(!out.join("report.html").exists(), "no work done");
    assert!(started.elapsed().as_secs() < 20);
    // A file where the folder should be.
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let refused = cordillera(&[
        "advise",
        trace.to_str().unwrap(),
        "--quiet",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a folder"));
    // --force: the earlier report's files go, the user's stay.
    let done = cordillera(&[
        "advise",
        trace.to_str().unwrap(),
        "--quick",
        "--quiet",
        "--force",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(out.join("report.html").exists());
    assert!(!out.join("stale.svg").exists());
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn time_units_are_detected_or_the_assumption_is_said() {
    let Some(traces) =
        cordillera_testkit::traces_dir("time_units_are_detected_or_the_assumption_is_said")
    else {
        return;
    };
    // UMass TPC-C, MQSim nanoseconds: detected, so the span is 0.14 s and gears cannot be
    // judged (read in ms it spanned 37.9 h and gears "applied").
    let tpcc = traces.join("umass/tpcc_small.mqsim.trace");
    let (r, _) = advise_json(&[tpcc.to_str().unwrap()]);
    let span = r["characterization"]["duration_s"].as_f64().unwrap();
    assert!((0.13..0.15).contains(&span), "{span}");
    assert!(notes(&r).contains("read in ns"), "{}", notes(&r));
    assert_eq!(verdict(&r, "gears")["outcome"], "cannot-judge");
    // MSN file server, fractional milliseconds: assumed ms, and the seconds reading named.
    let msn = traces.join("msr_production/msnfs_slice.ms.trace");
    let (r, stderr) = advise_json(&[msn.to_str().unwrap()]);
    let n = notes(&r);
    assert!(
        n.contains("warning") && n.contains("assuming ms") && n.contains("--time-unit"),
        "{n}"
    );
    assert!(!stderr.contains("panicked"));
}

#[test]
fn a_trace_without_timestamps_gets_no_time_based_verdict() {
    let Some(traces) =
        cordillera_testkit::traces_dir("a_trace_without_timestamps_gets_no_time_based_verdict")
    else {
        return;
    };
    let arc = traces.join("arc/P3.lis.zst");
    let (r, _) = advise_json(&[arc.to_str().unwrap()]);
    for m in ["peak off-load", "gears", "warm-up", "striping"] {
        let v = verdict(&r, m);
        assert_eq!(v["outcome"], "cannot-judge", "{v}");
        assert!(
            v["summary"].as_str().unwrap().contains("no timestamps"),
            "{v}"
        );
        assert!(v["figures"].as_array().unwrap().is_empty(), "{v}");
    }
    assert_eq!(r["device"]["chosen"], "assumed");
}

#[test]
fn too_little_evidence_is_said_not_judged() {
    let dir = tempfile::tempdir().unwrap();
    // One request.
    let one = dir.path().join("one.csv");
    std::fs::write(&one, "128166372003061629,web,0,Write,0,4096,100\n").unwrap();
    let (r, _) = advise_json(&[one.to_str().unwrap()]);
    for v in r["verdicts"].as_array().unwrap() {
        assert_ne!(v["outcome"], "applies", "{v}");
    }
    assert!(verdict(&r, "striping")["summary"]
        .as_str()
        .unwrap()
        .contains("1 volume"));
    assert!(verdict(&r, "peak off-load")["summary"]
        .as_str()
        .unwrap()
        .contains("too few"));
    // Two volumes, 300 requests: striping needs more.
    let two = dir.path().join("two.csv");
    let lines: String = msr_lines(300, 2)
        .lines()
        .enumerate()
        .map(|(i, l)| {
            format!(
                "{}\n",
                if i % 2 == 0 {
                    l.replace(",db,", ",web,")
                } else {
                    l.to_owned()
                }
            )
        })
        .collect();
    std::fs::write(&two, lines).unwrap();
    let (r, _) = advise_json(&[two.to_str().unwrap()]);
    assert!(verdict(&r, "striping")["summary"]
        .as_str()
        .unwrap()
        .contains("say nothing of a load"));
    // 0.5 % reads over 20,000 requests: a read cache cannot matter.
    let writes = dir.path().join("writes.csv");
    std::fs::write(&writes, msr_lines(20_000, 200)).unwrap();
    let (r, _) = advise_json(&[writes.to_str().unwrap()]);
    let v = verdict(&r, "warm-up");
    assert_eq!(v["outcome"], "does-not-apply", "{v}");
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .contains("0.5 % of the requests"),
        "{v}"
    );
}

#[test]
fn out_of_order_timestamps_are_sorted_and_said() {
    let Some(traces) =
        cordillera_testkit::traces_dir("out_of_order_timestamps_are_sorted_and_said")
    else {
        return;
    };
    let tencent = traces.join("tencent/tencent_cbs_sample.csv.bz2");
    let (r, _) = advise_json(&[tencent.to_str().unwrap()]);
    assert!(notes(&r).contains("out of time order"), "{}", notes(&r));
    let c = &r["characterization"];
    for b in c["profile"]["buckets"].as_array().unwrap() {
        assert!(b["start_s"].as_f64().unwrap() >= 0.0, "{b}");
    }
    for d in c["profile"]["days"].as_array().unwrap() {
        assert!(d["day"].as_i64().unwrap() >= 0, "{d}");
    }
    // The busiest window is never below the mean, per volume or in total.
    for v in c["stats"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .chain([&c["stats"]["total"]])
    {
        if let Some(mean) = v["mean_rate_per_s"].as_f64() {
            assert!(
                v["peak_rate_per_s"].as_f64().unwrap() >= mean * (1.0 - 1e-9),
                "{v}"
            );
        }
    }
}

#[test]
fn swapped_fields_and_headers_are_caught_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    // Offset and size swapped: refused at once with the line, no hang in "characterizing".
    let swapped = dir.path().join("swapped.csv");
    let t0: u64 = 128_166_372_000_000_000;
    let lines: String = (0..50_000u64)
        .map(|i| {
            format!(
                "{},db,0,Write,8192,{},100\n",
                t0 + i * 1000,
                (i + 1) * 1_048_576 * 4096
            )
        })
        .collect();
    std::fs::write(&swapped, lines).unwrap();
    let started = std::time::Instant::now();
    let out = cordillera(&["advise", swapped.to_str().unwrap(), "--quiet"]);
    assert!(!out.status.success());
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(
        message.contains("swapped.csv:1: request larger than 64 MiB"),
        "{message}"
    );
    assert!(started.elapsed().as_secs() < 20);
    // A header row: skipped, with a note.
    let headed = dir.path().join("headed.csv");
    let mut text = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n".to_owned();
    text.push_str(&msr_lines(600, 3));
    std::fs::write(&headed, text).unwrap();
    let (r, _) = advise_json(&[headed.to_str().unwrap()]);
    assert!(
        notes(&r).contains("skipped the header row"),
        "{}",
        notes(&r)
    );
    assert_eq!(r["characterization"]["records"], 600);
}

#[test]
fn verdicts_are_in_the_magnitudes_of_the_device_judged_on() {
    let Some(traces) =
        cordillera_testkit::traces_dir("verdicts_are_in_the_magnitudes_of_the_device_judged_on")
    else {
        return;
    };
    let hm = traces.join("msr/hm_0.chunk_148s.csv");
    // Fitted from the trace's recorded response times (a cached array: flash-like), shown
    // recorded against simulated.
    let (fitted, _) = advise_json(&[hm.to_str().unwrap()]);
    let d = &fitted["device"];
    assert_eq!(d["chosen"], "fitted", "{d}");
    assert_eq!(d["fit"].as_array().unwrap().len(), 5);
    assert!(d["recorded"]["read_mean_ms"].as_f64().unwrap() > 0.0);
    assert!(d["simulated"]["read_mean_ms"].as_f64().unwrap() > 0.0);
    // The same trace on one 7,200 RPM disk.
    let (disk, _) = advise_json(&[
        hm.to_str().unwrap(),
        "--device",
        "hdd-7200",
        "--array",
        "raid0:4",
    ]);
    assert_eq!(disk["device"]["chosen"], "given");
    let ms = |r: &serde_json::Value| {
        verdict(r, "peak off-load")["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["key"] == "offload/baseline_ms")
            .unwrap()["mean"]
            .as_f64()
            .unwrap()
    };
    let (flash, hdd) = (ms(&fitted), ms(&disk));
    assert!(
        hdd > 5.0 * flash,
        "disk {hdd} ms against {} {flash} ms",
        d["device"]
    );
    let cmd = verdict(&disk, "peak off-load")["commands"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        cmd.contains("--device hdd-7200 --array raid0:4:64k"),
        "{cmd}"
    );
    // An unknown device is refused before any work.
    let out = cordillera(&["advise", hm.to_str().unwrap(), "--device", "floppy"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown device"));
}
