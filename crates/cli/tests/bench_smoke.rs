//! Every benchmark of `scripts/bench.sh` in a smoke run of a few seconds, so that none can rot
//! between full runs: each runs to its end on tiny sizes and prints the figures the full run
//! prints (its JSON, the peer's figures beside ours where it has a peer). The figures
//! themselves are not judged here: the machine is shared and the runs are short
//! (docs/BENCHMARKS.md has the full runs). `bench trace`, `bench rangemap` and `store bench`
//! have their smoke runs in `trace_cli.rs` and `store_cli.rs`.

use cordillera_testkit::process::{have, Bounded, COMMAND_LIMIT};
use std::process::Command;

/// Runs `cordillera ARGS… --json`; its JSON output.
fn bench(args: &[&str]) -> serde_json::Value {
    bench_within(args, COMMAND_LIMIT)
}

fn bench_within(args: &[&str], limit: std::time::Duration) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args(args)
        .arg("--json")
        .output_within(limit)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{args:?}:\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}:\n{stdout}"))
}

/// `value` is a finite number above zero.
fn positive(value: &serde_json::Value, what: &str) -> f64 {
    let v = value
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {value}"));
    assert!(v.is_finite() && v > 0.0, "{what}: {v}");
    v
}

/// Every policy, at a cache of 16,384 blocks and one of 100 (where ARC's target size moves by
/// more than one block at a time, and every list is full).
#[test]
fn bench_cache_prints_each_policy_beside_the_baseline() {
    for size in ["64m", "400k"] {
        bench_cache_at(size);
    }
}

fn bench_cache_at(size: &str) {
    let j = bench(&[
        "bench",
        "cache",
        "--trace",
        "gen:zipf:count=200000,span=1g",
        "--cache-size",
        size,
        "--repeat",
        "1",
    ]);
    assert_eq!(j["requests"], 200_000);
    positive(&j["lru_ratio_to_baseline"], "lru_ratio_to_baseline");
    let policies: Vec<&str> = j["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    const ALL: [&str; 6] = ["lru", "fifo", "clock", "sieve", "s3fifo", "arc"];
    for p in ALL {
        assert!(policies.contains(&p), "{policies:?}");
    }
    assert!(
        policies.iter().any(|p| p.starts_with("baseline")),
        "{policies:?}"
    );
    // libCacheSim on the same block accesses, each policy's hits equal to ours (the bench
    // fails otherwise) and its rate beside ours.
    let peer = &j["libcachesim"];
    if peer.is_null() {
        cordillera_testkit::missing(
            "bench cache's peer needs libCacheSim's Python bindings (pip install libcachesim; scripts/test.sh installs them)",
        );
        return;
    }
    let ours = j["policies"].as_array().unwrap();
    let theirs = peer["policies"].as_array().unwrap();
    for p in ALL {
        let mine = ours.iter().find(|r| r["policy"] == p).unwrap();
        let peer = theirs
            .iter()
            .find(|r| r["policy"] == p)
            .unwrap_or_else(|| panic!("no libCacheSim {p}: {theirs:?}"));
        assert_eq!(peer["hits"], mine["read_block_hits"], "{p} at {size}");
        positive(&peer["requests_per_s"], "libCacheSim's rate");
        positive(&peer["ours_over_libcachesim"], "ours over libCacheSim");
    }
}

#[test]
fn volume_warmup_bench_prints_both_schemes() {
    let j = bench(&[
        "volume",
        "warmup-bench",
        "--trace",
        "gen:zipf:count=5000,span=64m,alpha=1",
        "--region",
        "64m",
        "--cache-size",
        "16m",
    ]);
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{j}");
    for r in rows {
        positive(&r["preloaded_bytes"], "preloaded_bytes");
        positive(&r["hit_rate_after_restart"], "hit_rate_after_restart");
    }
    positive(&j["cold_hit_rate"], "cold_hit_rate");
}

#[test]
fn bench_lab_bonfire_prints_time_rate_and_memory() {
    let j = bench(&[
        "bench",
        "lab-bonfire",
        "--records",
        "20k",
        "--days",
        "2",
        "--volumes",
        "2",
        "--sizes",
        "1",
        "--span",
        "64m",
    ]);
    let run = &j[0];
    positive(&run["records"], "records");
    positive(&run["records_per_s"], "records_per_s");
    positive(&run["peak_rss_bytes"], "peak_rss_bytes");
}

#[test]
fn bench_advise_prints_each_step_and_the_verdicts() {
    let j = bench(&["bench", "advise", "--rates", "1", "--seeds", "1"]);
    let runs = j.as_array().unwrap();
    assert_eq!(runs.len(), 2, "a full and a quick run: {j}");
    for run in runs {
        positive(&run["wall_s"], "wall_s");
        assert_eq!(run["steps"].as_array().unwrap().len(), 5, "{run}");
        assert_eq!(run["verdicts"].as_array().unwrap().len(), 4, "{run}");
    }
}

#[test]
fn volume_bench_prints_every_ratio_against_nbdkit() {
    if !have("fio") || !have("nbdkit") {
        return;
    }
    let j = bench(&[
        "volume",
        "bench",
        "--seconds",
        "1",
        "--repeat",
        "1",
        "--region",
        "64m",
    ]);
    for key in [
        "randwrite_4k_ratio",
        "seqwrite_1m_ratio",
        "randread_4k_ratio",
        "randrw_70_30_4k_ratio",
        "seqread_1m_ratio",
        "partly_offloaded_randread_4k_ratio",
        "partly_offloaded_randrw_70_30_4k_ratio",
        "partly_offloaded_seqread_1m_ratio",
        "partly_offloaded_randrw_70_30_4k_baseline_policy_ratio",
        "partly_offloaded_randrw_70_30_4k_durable_ratio",
        "randrw_70_30_4k_iops_nbdkit_durable",
        "emulated_randwrite_64k_ratio",
    ] {
        positive(&j[key], key);
    }
    // Servers and fio kept apart wherever the machine has CPUs 0 and 1 (the bench's default).
    assert_eq!(j["pinned"].as_bool(), Some(two_cpus()), "{}", j["pinned"]);
    // Each read load's figures, one per round for each server.
    let loads = j["rounds_reads"].as_array().expect("rounds_reads");
    assert_eq!(loads.len(), 3, "{loads:?}");
    for load in loads {
        for side in ["nbdkit", "volume", "partly_offloaded"] {
            let figures = load[side].as_array().unwrap_or_else(|| panic!("{side}"));
            assert_eq!(figures.len(), 1, "{load}");
            positive(&figures[0], side);
        }
        // The CPU each server spent per request, and fio's share of a CPU: every server
        // measured did work (the store serves the partly off-loaded volume's pieces), and
        // fio cannot have used more than its one CPU (its JSON rounds; a little over 1 is
        // the rounding of two percentages).
        let cpu = &load["cpu_us_per_request"];
        for side in ["nbdkit", "volume", "partly_volume", "partly_store"] {
            let figures = cpu[side]
                .as_array()
                .unwrap_or_else(|| panic!("{side}: {cpu}"));
            assert_eq!(figures.len(), 1, "{cpu}");
            positive(&figures[0], side);
        }
        for side in ["nbdkit_fio", "volume_fio", "partly_fio"] {
            let share = cpu[side][0]
                .as_f64()
                .unwrap_or_else(|| panic!("{side}: {cpu}"));
            assert!(share > 0.0 && share <= 1.05, "{side}: {share}");
        }
    }
    // Under --policy baseline the mix's writes over data on the store are still off-loaded,
    // and only those: fio's random writes (on a sequence of their own, not the earlier mix's)
    // fall on such blocks as often as the region holds them (how much of a 64 MiB region the
    // earlier mix under --policy always off-loaded depends on the machine's rate, up to all
    // of it).
    let per_round = |key: &str| -> f64 {
        let v = j[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: per round"));
        assert_eq!(v.len(), 1, "{key}");
        v[0].as_f64().unwrap()
    };
    let on_store = per_round("partly_offloaded_baseline_policy_fraction_of_region");
    let share = per_round("partly_offloaded_baseline_policy_mix_offloaded_writes");
    assert!((0.25..=1.0).contains(&on_store), "{on_store}");
    assert!(
        (share - on_store).abs() < 0.1,
        "{share} of the writes off-loaded with {on_store} of the region on the store"
    );
}

#[test]
fn pool_bench_prints_narrow_wide_and_the_restripe() {
    if !have("fio") {
        return;
    }
    let j = bench(&[
        "pool",
        "bench",
        "--seconds",
        "1",
        "--rounds",
        "1",
        "--restripe-size",
        "32m",
        "--batch",
        "4m",
    ]);
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "narrow and wide, reads and writes: {j}");
    for r in rows {
        positive(&r["random_64k"]["iops"], "random_64k iops");
        positive(&r["sequential_1m"]["mb_per_s"], "sequential_1m MB/s");
    }
    positive(&j["restripe"]["mb_per_s"], "restripe MB/s");
}

#[test]
fn volume_pgbench_prints_the_three_configurations() {
    let root = Command::new("id")
        .arg("-u")
        .output_within(COMMAND_LIMIT)
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        cordillera_testkit::missing(
            "this test needs root (to attach a loop device and mount ext4)",
        );
        return;
    }
    if !have("nbdfuse") || !have("losetup") {
        return;
    }
    let traces = tempfile::tempdir().unwrap();
    let j = bench(&[
        "volume",
        "pgbench",
        "--seconds",
        "2",
        "--scale",
        "1",
        "--clients",
        "2",
        "--size",
        "1g",
        "--record-trace",
        traces.path().to_str().unwrap(),
    ]);
    let configurations = j["cases"].as_array().unwrap();
    assert_eq!(configurations.len(), 3, "{j}");
    for c in configurations {
        positive(&c["tps"], "tps");
    }
    positive(&j["peak_ratio"], "peak_ratio");
    positive(&j["always_ratio"], "always_ratio");
    // PostgreSQL's own I/O on the emulated 15K disk, recorded: advise fits a disk to its
    // response times, not flash.
    let recorded = traces.path().join("no-off-load-1.cdt");
    let out = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args([
            "advise",
            recorded.to_str().unwrap(),
            "--quick",
            "--quiet",
            "--json",
        ])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let device = &report[0]["device"];
    assert_eq!(device["chosen"], "fitted", "{device}");
    assert!(
        device["device"].as_str().unwrap().starts_with("hdd-"),
        "{device}"
    );
}

/// The cluster benchmark at its smallest: a day of 2-second hours on two servers per rack by
/// the paper's method (three runs of the day: the baseline, the baseline of as many servers as
/// chunk servers and loggers, gear shifting), Table 5 for a second (its writes again on a
/// plain volume), Figure 12 on one cluster (about three and a half minutes).
#[test]
fn cluster_bench_prints_the_day_table_5_and_figure_12() {
    // Three runs of a 48 s day with the clusters' starts and stops, Table 5, Figure 12: past
    // the usual command limit on a busy two-core machine.
    let j = bench_within(
        &[
            "cluster",
            "bench",
            "--per-rack",
            "2",
            "--hour-seconds",
            "2",
            "--wake-seconds",
            "0.2",
            "--throughput-seconds",
            "1",
            "--rebuild-per-rack",
            "2",
            "--rebuild-bytes-per-server",
            "8m",
            "--object-size",
            "256m",
        ],
        std::time::Duration::from_secs(420),
    );
    assert_eq!(j["method"], "paper", "{j}");
    let seed = &j["seeds"][0];
    let plan = seed["plan"].as_array().unwrap();
    assert_eq!(plan.len(), 24, "{j}");
    // The maintenance hours run in the top gear; every gear sustains its hour's busiest second.
    for h in plan {
        let gear = h["gear"].as_u64().unwrap();
        if h["maintenance"] == true {
            assert_eq!(gear, 3, "{h}");
        } else {
            let needed = h["peak"].as_f64().unwrap() / 6.0 * 3.0;
            assert!(gear as f64 >= needed - 1e-9 || gear == 3, "{h}");
        }
    }
    assert!(plan.iter().any(|h| h["gear"].as_u64() < Some(3)), "{j}");
    // The paper's provisioning rule gives the cluster's servers for the day generated.
    assert_eq!(seed["provisioned_servers"], 6, "{seed}");
    // The loggers are measured, and the second baseline ran with 3 servers per rack.
    positive(&seed["logger_energy_j"], "loggers' energy");
    positive(
        &seed["baseline_all"]["energy_j"],
        "the 9-server baseline's energy",
    );
    assert!(
        seed["baseline_all"]["energy_j"].as_f64() > seed["baseline"]["energy_j"].as_f64(),
        "{seed}"
    );
    for phase in ["baseline", "baseline_all", "gears"] {
        assert_eq!(seed[phase]["replay"]["errors"], 0, "{phase}");
    }
    let throughput = j["throughput"].as_array().unwrap();
    assert!(!throughput.is_empty(), "{j}");
    for t in throughput {
        positive(&t["measured"], "Table 5 measured");
        assert_eq!(t["errors"], 0, "{t}");
        // The write rows ran again on a plain volume on one emulated disk, at the depth each
        // of the cluster's 6 disks sees (r = 3): 6 streams → 3, 64 random → 32.
        let plain = &t["plain"];
        if t["workload"].as_str().unwrap().ends_with("writes") {
            positive(&plain["measured"], "plain volume measured");
            assert_eq!(plain["errors"], 0, "{t}");
            let depth = if t["unit"] == "MB/s" { 3 } else { 32 };
            assert_eq!(plain["depth"], depth, "{t}");
            let ratio =
                t["measured"].as_f64().unwrap() / (plain["measured"].as_f64().unwrap() * 6.0 / 3.0);
            let printed = plain["cluster_over_plain_disks"].as_f64().unwrap();
            assert!((ratio - printed).abs() < 1e-9, "{t}");
        } else {
            assert!(plain.is_null(), "{t}");
        }
    }
    positive(&j["rebuild"][0]["mb_per_s"], "Figure 12 MB/s");
}

#[test]
fn bench_tls_prints_ours_and_nbdkits_with_and_without_tls() {
    if !have("nbdcopy") || !have("nbdkit") {
        return;
    }
    let j = bench(&["bench", "tls", "--region", "16m", "--repeat", "1"]);
    let rows = j.as_array().unwrap();
    let loads: Vec<&str> = rows.iter().map(|r| r["load"].as_str().unwrap()).collect();
    assert_eq!(loads, ["write_1m", "read_1m", "read_4k"]);
    for r in rows {
        for field in [
            "volume_tls",
            "nbdkit_tls",
            "volume_plain",
            "nbdkit_plain",
            "ratio_tls",
        ] {
            positive(&r[field], field);
        }
        assert_eq!(r["pinned"].as_bool(), Some(two_cpus()), "{}", r["pinned"]);
    }
}

/// Whether this process may run on CPUs 0 and 1, where the benches keep servers and client.
fn two_cpus() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    let allowed = |cpu: u32| {
        list.split(',').any(|part| match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().unwrap()..=b.parse().unwrap()).contains(&cpu),
            None => part.parse::<u32>().unwrap() == cpu,
        })
    };
    allowed(0) && allowed(1)
}
