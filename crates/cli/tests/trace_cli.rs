//! The `cordillera trace` commands end to end, on the shared MSR traces: `stats --json` against
//! an independent recomputation, byte-identical MSR → binary → MSR, and fio replaying an iolog.

use cordillera_testkit::process::{signal, Bounded, COMMAND_LIMIT};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn cordillera() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cordillera"))
}

use cordillera_testkit::traces_dir;

fn msr_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for sub in ["msr", "msr/samples_writeonly"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "csv") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 9, "expected the MSR files of INVENTORY.md");
    files
}

fn run_ok(command: &mut Command) -> Vec<u8> {
    let out = command
        .output_within(COMMAND_LIMIT)
        .expect("run cordillera");
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The definitions of `trace stats`, computed here from the CSV text alone.
#[derive(Default)]
struct Expected {
    records: u64,
    reads: u64,
    writes: u64,
    read_bytes: u64,
    write_bytes: u64,
    times: Vec<i128>,
    blocks: HashSet<u64>,
    /// Distinct (volume, block) pairs.
    wss_blocks: u64,
    block_accesses: u64,
    reaccesses: u64,
}

fn recompute(path: &Path) -> (Vec<String>, HashMap<String, Expected>, Expected) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut order = Vec::new();
    let mut volumes: HashMap<String, Expected> = HashMap::new();
    let mut total = Expected::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 7);
        let name = format!("{}_{}", f[1], f[2]);
        if !volumes.contains_key(&name) {
            order.push(name.clone());
        }
        let v = volumes.entry(name).or_default();
        let ticks: i128 = f[0].parse().unwrap();
        let offset: u64 = f[4].parse().unwrap();
        let size: u64 = f[5].parse().unwrap();
        for e in [&mut *v, &mut total] {
            e.records += 1;
            e.times.push(ticks * 100);
            if f[3] == "Read" {
                e.reads += 1;
                e.read_bytes += size;
            } else {
                e.writes += 1;
                e.write_bytes += size;
            }
        }
        if size > 0 {
            for block in offset / 4096..=(offset + size - 1) / 4096 {
                v.block_accesses += 1;
                if !v.blocks.insert(block) {
                    v.reaccesses += 1;
                }
            }
        }
    }
    for v in volumes.values_mut() {
        v.wss_blocks = v.blocks.len() as u64;
        total.wss_blocks += v.wss_blocks;
        total.block_accesses += v.block_accesses;
        total.reaccesses += v.reaccesses;
    }
    (order, volumes, total)
}

fn close(got: &serde_json::Value, want: f64, what: &str) {
    let got = got.as_f64().unwrap_or_else(|| panic!("{what}: {got}"));
    let scale = want.abs().max(1e-12);
    assert!(
        ((got - want) / scale).abs() <= 1e-6,
        "{what}: got {got}, want {want}"
    );
}

fn check(entry: &serde_json::Value, e: &Expected, window_s: f64, name: &str) {
    assert_eq!(entry["volume"], name);
    assert_eq!(entry["records"], e.records, "{name} records");
    assert_eq!(entry["reads"], e.reads, "{name}");
    assert_eq!(entry["writes"], e.writes, "{name}");
    assert_eq!(entry["read_bytes"], e.read_bytes, "{name}");
    assert_eq!(entry["write_bytes"], e.write_bytes, "{name}");
    assert_eq!(entry["wss_bytes"], e.wss_blocks * 4096, "{name}");
    let first = e.times[0];
    let span_s = (e.times.iter().max().unwrap() - e.times.iter().min().unwrap()) as f64 / 1e9;
    close(&entry["span_s"], span_s, "span_s");
    let mean = e.records as f64 / span_s;
    close(&entry["mean_rate_per_s"], mean, "mean_rate_per_s");
    let window_ns = (window_s * 1e9) as i128;
    let mut windows: HashMap<i128, u64> = HashMap::new();
    for t in &e.times {
        *windows
            .entry((t - first).div_euclid(window_ns))
            .or_default() += 1;
    }
    // Each window's count over a whole window; the last window, which the trace's end cuts
    // short, also over the time it covers — on its own when that is a quarter of a window or
    // more, joined to the one before it when less; a trace within one window has its mean.
    // (MSR files are in time order: no window before the first record's.)
    let last = (e.times.iter().max().unwrap() - first).div_euclid(window_ns);
    let count = |i: i128| windows.get(&i).copied().unwrap_or(0) as f64;
    let busiest = *windows.values().max().unwrap() as f64 / window_s;
    let last_s = (e.times.iter().max().unwrap() - first - last * window_ns) as f64 / 1e9;
    let peak = if last == 0 || (last == 1 && last_s < window_s / 4.0) {
        busiest.max(mean)
    } else if last_s < window_s / 4.0 {
        busiest.max((count(last - 1) + count(last)) / (window_s + last_s))
    } else {
        busiest.max(count(last) / last_s)
    };
    assert!(
        peak >= mean * (1.0 - 1e-9),
        "{name}: peak {peak} below mean {mean}"
    );
    close(&entry["peak_rate_per_s"], peak, "peak_rate_per_s");
    close(&entry["peak_to_mean"], peak / mean, "peak_to_mean");
    close(
        &entry["reaccess_pct"],
        100.0 * e.reaccesses as f64 / e.block_accesses as f64,
        "reaccess_pct",
    );
    close(
        &entry["mean_request_bytes"],
        (e.read_bytes + e.write_bytes) as f64 / e.records as f64,
        "mean_request_bytes",
    );
    let fields: Vec<&String> = entry.as_object().unwrap().keys().collect();
    let mut want = vec![
        "volume",
        "records",
        "reads",
        "writes",
        "read_bytes",
        "write_bytes",
        "span_s",
        "mean_rate_per_s",
        "peak_rate_per_s",
        "peak_to_mean",
        "wss_bytes",
        "reaccess_pct",
        "mean_request_bytes",
    ];
    want.sort();
    let mut fields: Vec<&str> = fields.iter().map(|s| s.as_str()).collect();
    fields.sort();
    assert_eq!(fields, want);
}

#[test]
fn stats_json_equals_an_independent_recomputation() {
    let Some(dir) = traces_dir("stats_json_equals_an_independent_recomputation") else {
        return;
    };
    for path in msr_files(&dir) {
        for window_s in [60.0, 1.0] {
            let out = run_ok(
                cordillera()
                    .args(["trace", "stats", "--json", "--window-s"])
                    .arg(window_s.to_string())
                    .arg(&path),
            );
            let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
            let (order, volumes, total) = recompute(&path);
            let listed = json["volumes"].as_array().unwrap();
            assert_eq!(listed.len(), order.len());
            for (entry, name) in listed.iter().zip(&order) {
                check(entry, &volumes[name], window_s, name);
            }
            check(&json["total"], &total, window_s, "total");
        }
    }
}

#[test]
fn msr_binary_msr_round_trips_byte_identically() {
    let Some(dir) = traces_dir("msr_binary_msr_round_trips_byte_identically") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for path in msr_files(&dir) {
        let bin = tmp.path().join("t.cdt");
        let back = tmp.path().join("t.csv");
        run_ok(
            cordillera()
                .args(["trace", "convert"])
                .arg(&path)
                .arg(&bin)
                .args(["--to", "binary"]),
        );
        run_ok(
            cordillera()
                .args(["trace", "convert"])
                .arg(&bin)
                .arg(&back)
                .args(["--to", "msr"]),
        );
        let original = std::fs::read(&path).unwrap();
        let round = std::fs::read(&back).unwrap();
        assert!(original == round, "{} does not round-trip", path.display());
        let bin_size = std::fs::metadata(&bin).unwrap().len();
        assert!(
            bin_size * 3 < original.len() as u64,
            "binary is compact: {bin_size} vs {}",
            original.len()
        );
        assert!(!tmp.path().join("t.csv.partial").exists());
    }
}

#[test]
fn malformed_input_fails_with_file_line_and_text() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.csv");
    std::fs::write(
        &bad,
        "128166481075232275,rsrch,1,Write,281358336,45056,94872\n128166481075232718,rsrch,1,Rite,281292800,65536,94430\n",
    )
    .unwrap();
    let out = cordillera()
        .args(["trace", "stats", "--format", "msr"])
        .arg(&bad)
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.csv:2:") && stderr.contains("Rite"),
        "{stderr}"
    );
    let out = cordillera()
        .args([
            "trace",
            "stats",
            "--json",
            "--skip-invalid",
            "--format",
            "msr",
        ])
        .arg(&bad)
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("skipped 1 malformed line"), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["total"]["records"], 1);
    // A failed conversion leaves no output behind.
    let out_path = tmp.path().join("out.cdt");
    let out = cordillera()
        .args(["trace", "convert"])
        .arg(&bad)
        .arg(&out_path)
        .args(["--to", "binary"])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(!out.status.success());
    assert!(!out_path.exists() && !tmp.path().join("out.cdt.partial").exists());
}

use cordillera_testkit::process::have;

/// Replays `iolog` with fio and returns the (read, write) I/Os it issued.
fn fio_replay(iolog: &Path, engine: &[String]) -> (u64, u64) {
    let out = iolog.with_extension("fio.json");
    let status = Command::new("fio")
        .args(["--name=replay", "--output-format=json"])
        .args(engine)
        .arg(format!("--read_iolog={}", iolog.display()))
        .arg(format!("--output={}", out.display()))
        .status_within(COMMAND_LIMIT)
        .unwrap();
    assert!(status.success(), "fio {engine:?} on {}", iolog.display());
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let job = &json["jobs"][0];
    assert_eq!(job["error"], 0, "fio job error");
    (
        job["read"]["total_ios"].as_u64().unwrap(),
        job["write"]["total_ios"].as_u64().unwrap(),
    )
}

#[test]
fn fio_replays_a_converted_iolog_on_a_file_and_over_nbd() {
    let Some(dir) = traces_dir("fio_replays_a_converted_iolog_on_a_file_and_over_nbd") else {
        return;
    };
    if !have("fio") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = dir.join("msr/hm_0.chunk_148s.csv");
    let image = tmp.path().join("target.img");
    let size: u64 = 64 << 20;
    std::fs::File::create(&image)
        .unwrap()
        .set_len(size)
        .unwrap();
    let iolog = tmp.path().join("replay.iolog");
    run_ok(
        cordillera()
            .args(["trace", "convert"])
            .arg(&trace)
            .arg(&iolog)
            .args([
                "--to",
                "fio-iolog",
                "--iolog-wrap-bytes",
                &size.to_string(),
                "--iolog-target",
            ])
            .arg(&image),
    );
    let text = std::fs::read_to_string(&iolog).unwrap();
    assert!(text.starts_with("fio version 2 iolog\n"));
    let reads = text.lines().filter(|l| l.contains(" read ")).count() as u64;
    let writes = text.lines().filter(|l| l.contains(" write ")).count() as u64;
    assert_eq!(reads + writes, 7_016, "one line per record");
    assert_eq!(
        fio_replay(&iolog, &["--ioengine=psync".into()]),
        (reads, writes),
        "fio replays every I/O of the log on a file"
    );
    let written = std::fs::read(&image).unwrap();
    assert!(
        written.iter().any(|b| *b != 0),
        "the replayed writes reached the file"
    );

    if !have("nbdkit") {
        return;
    }
    let socket = tmp.path().join("nbd.sock");
    let pid_file = tmp.path().join("nbd.pid");
    let status = Command::new("nbdkit")
        .arg("-U")
        .arg(&socket)
        .arg("-P")
        .arg(&pid_file)
        .args(["memory", &size.to_string()])
        .status_within(COMMAND_LIMIT)
        .unwrap();
    assert!(status.success(), "nbdkit starts");
    struct Kill(PathBuf);
    impl Drop for Kill {
        fn drop(&mut self) {
            if let Ok(pid) = std::fs::read_to_string(&self.0) {
                if let Ok(pid) = pid.trim().parse() {
                    let _ = signal(pid, "TERM");
                }
            }
        }
    }
    let _kill = Kill(pid_file.clone());
    for _ in 0..100 {
        if socket.exists() && pid_file.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let nbd_log = tmp.path().join("nbd.iolog");
    std::fs::write(&nbd_log, text.replace(image.to_str().unwrap(), "nbd")).unwrap();
    let uri = format!("--uri=nbd+unix:///?socket={}", socket.display());
    assert_eq!(
        fio_replay(&nbd_log, &["--ioengine=nbd".into(), uri]),
        (reads, writes),
        "fio replays every I/O of the log over NBD"
    );
}

#[test]
fn bench_trace_prints_its_figures() {
    let out = run_ok(cordillera().args([
        "bench",
        "trace",
        "--records",
        "100000",
        "--repeat",
        "1",
        "--json",
    ]));
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["records"], 100_000);
    let results = json["results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    for r in results {
        assert!(r["records_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn bench_rangemap_prints_its_figures() {
    let out = run_ok(cordillera().args([
        "bench", "rangemap", "--ranges", "20000", "--ops", "20000", "--repeat", "1", "--json",
    ]));
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["ranges"], 20_000);
    for figure in [
        "range_map_lookup_update_ns",
        "btreemap_get_insert_ns",
        "pieces_per_lookup",
    ] {
        assert!(json[figure].as_f64().unwrap() > 0.0, "{figure}: {json}");
    }
    // 20,000 random writes of 4–64 KiB over 20,000 ranges 16 KiB apart merge and split ranges.
    let after = json["ranges_after"].as_u64().unwrap();
    assert!(after > 1000 && after != 20_000, "{after}");
}

/// The analyses are independent implementations over the same records: where their
/// definitions meet, their figures must agree.
#[test]
fn analyses_agree_with_each_other_on_every_msr_file() {
    let Some(dir) = traces_dir("analyses_agree_with_each_other_on_every_msr_file") else {
        return;
    };
    let json = |args: &[&str], path: &Path| -> serde_json::Value {
        serde_json::from_slice(&run_ok(cordillera().args(args).arg(path))).unwrap()
    };
    for path in msr_files(&dir) {
        let stats = json(&["trace", "stats", "--json"], &path);
        let reaccess = json(&["trace", "reaccess", "--json"], &path);
        let profile = json(&["trace", "profile", "--json"], &path);
        let peaks = json(&["trace", "peaks", "--json", "--top", "1000"], &path);
        let total = &stats["total"];
        // Reaccesses: a hash set (stats) and the reuse-distance tracker (reaccess).
        assert_eq!(
            reaccess["total"]["reaccess_pct"],
            total["reaccess_pct"],
            "{}",
            path.display()
        );
        let classes: u64 = reaccess["total"]["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["reaccesses"].as_u64().unwrap())
            .sum();
        let buckets: u64 = reaccess["total"]["reuse_distance"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["reaccesses"].as_u64().unwrap())
            .sum();
        assert_eq!(classes, reaccess["total"]["reaccesses"].as_u64().unwrap());
        assert_eq!(buckets, classes);
        // Profile buckets and days hold every record and byte.
        let records = total["records"].as_u64().unwrap();
        let bytes = total["read_bytes"].as_u64().unwrap() + total["write_bytes"].as_u64().unwrap();
        let sum = |key: &str, field: &str| -> u64 {
            profile[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b[field].as_u64().unwrap())
                .sum()
        };
        assert_eq!(sum("buckets", "requests"), records);
        assert_eq!(sum("days", "requests"), records);
        assert_eq!(sum("buckets", "bytes"), bytes);
        // Disjoint episodes hold at most every record, and the first holds the busiest whole
        // window (the stats' peak may be busier: it also counts the cut last window, joined).
        let episodes = peaks["episodes"].as_array().unwrap();
        let in_episodes: u64 = episodes
            .iter()
            .map(|e| e["requests"].as_u64().unwrap())
            .sum();
        assert!(in_episodes <= records);
        let episode_peak = episodes[0]["peak_rate_per_s"].as_f64().unwrap();
        let stats_peak = total["peak_rate_per_s"].as_f64().unwrap();
        assert!(
            episode_peak <= stats_peak * (1.0 + 1e-12) && episode_peak > 0.0,
            "{}: episode peak {episode_peak}, stats peak {stats_peak}",
            path.display()
        );
    }
}
