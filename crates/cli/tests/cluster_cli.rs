//! Sierra on real processes (loopback): a local cluster — the MDS, six chunk servers in three
//! racks, a logger per rack, each its own process — with an object exported over NBD.
//! fio verifies every block it wrote while the gears shift 3 → 1 → 3 again and again, and the
//! loggers are empty at the end; the MDS and a chunk server holding primaries are SIGKILLed
//! and started again with the data verified after each.

mod cluster;

use cordillera_testkit::process::{Bounded, COMMAND_LIMIT};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cordillera_testkit::cluster::{ClusterOptions, Daemon, LocalCluster};
use cordillera_testkit::process::{fio_verify as fio, free_addr, have, qemu_io_patterns};

use cluster::{
    awake_servers, binary, last_words, qemu, start_cluster, start_volume, wait_gear_1, wait_quiet,
};

#[test]
fn fio_verifies_every_block_while_gears_shift_and_the_loggers_end_empty() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = start_cluster(dir.path());
    let (_vol, url) = start_volume(&c, "fio", "96m");
    // Gears 3 → 1 → 3 …, every 1.5 s, while fio writes and verifies: the three kinds of
    // run at least once each, and more of them until the gears have shifted four times (a
    // fast machine finishes the three before the second shift).
    let stop = Arc::new(AtomicBool::new(false));
    let shifted = Arc::new(AtomicUsize::new(0));
    let shifter = {
        let (stop, shifted, mds) = (stop.clone(), shifted.clone(), c.mds_addr());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                for g in ["1", "3"] {
                    let out = Command::new(binary())
                        .args(["cluster", "gear", g, "--mds", &mds])
                        .output_within(COMMAND_LIMIT)
                        .unwrap();
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    shifted.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(1500));
                }
            }
        })
    };
    let runs = [
        ("randwrite", "4k-64k"),
        ("write", "128k-128k"),
        ("randrw", "16k-16k"),
    ];
    let mut verified = 0;
    while verified < runs.len() || shifted.load(Ordering::SeqCst) < 4 {
        assert!(
            verified < 60,
            "the gears did not shift four times in 60 fio runs"
        );
        let round = verified % runs.len();
        let (rw, bs) = runs[round];
        let offset = format!("--offset={}m", round * 32);
        let text = fio(
            &url,
            &[
                &format!("--rw={rw}"),
                &format!("--bsrange={bs}"),
                "--size=32m",
                &offset,
                "--do_verify=1",
            ],
        );
        assert!(text.contains("err= 0"), "{text}");
        verified += 1;
    }
    stop.store(true, Ordering::SeqCst);
    shifter.join().unwrap();
    let shifts = shifted.load(Ordering::SeqCst);
    c.gear("3").unwrap();
    let mds = wait_quiet(&c, Duration::from_secs(60));
    let standbys = mds["stats"]["standbys"].as_u64().unwrap();
    let wakes = mds["stats"]["wakes"].as_u64().unwrap();
    let migrations = mds["stats"]["migrations"].as_u64().unwrap();
    let reclaimed: u64 = (0..c.servers())
        .map(|s| {
            c.status(Daemon::Server(s)).unwrap()["stats"]["reclaimed_bytes"]
                .as_u64()
                .unwrap()
        })
        .sum();
    println!(
        "cluster fio: {verified} verified runs, {shifts} gear shifts, {standbys} standbys, {wakes} wakes, {migrations} migrations, {reclaimed} bytes reclaimed; loggers empty at the end"
    );
    assert!(shifts >= 4 && standbys >= 4 && wakes >= 4, "{mds}");
    assert!(reclaimed > 0, "writes were logged in gear 1 and reclaimed");
    // Every block once more, after the reclaim, from the replicas.
    fio(
        &url,
        &[
            "--rw=randwrite",
            "--bsrange=4k-64k",
            "--size=32m",
            "--offset=0m",
            "--verify_only",
        ],
    );
}

#[test]
fn data_survives_sigkill_of_the_mds_and_of_a_chunk_server_holding_primaries() {
    if !have("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut c = start_cluster(dir.path());
    let (_vol, url) = start_volume(&c, "kill", "64m");
    let size: u64 = 64 << 20;
    qemu_io_patterns(&url, size).unwrap_or_else(|e| panic!("before: {e}"));
    // Data written once before any kill, read back after each.
    let (_keep, keep) = start_volume(&c, "keep", "16m");
    qemu(&keep, &["write -P 0x5a 0 16M"]).unwrap_or_else(|e| panic!("{e}"));
    let check = |when: &str| {
        qemu(&keep, &["read -P 0x5a 0 16M"]).unwrap_or_else(|e| panic!("{when}: {e}"));
    };

    // The MDS, killed and started again: the volume keeps serving from the leases it holds,
    // then from the restarted MDS's state.
    for round in 0..2 {
        c.kill(Daemon::Mds);
        std::thread::sleep(Duration::from_millis(300));
        c.spawn(Daemon::Mds).unwrap();
        qemu_io_patterns(&url, size).unwrap_or_else(|e| panic!("after MDS kill {round}: {e}"));
        check(&format!("after MDS kill {round}"));
    }
    // The chunk server holding the most primaries, killed: its groups go to other replicas.
    for round in 0..2 {
        let mds = c.status(Daemon::Mds).unwrap();
        let victim = mds["servers"]
            .as_array()
            .unwrap()
            .iter()
            .max_by_key(|s| s["primaries"].as_u64().unwrap())
            .map(|s| s["id"].as_u64().unwrap() as u32)
            .unwrap();
        c.kill(Daemon::Server(victim));
        let t = Instant::now();
        qemu_io_patterns(&url, size)
            .unwrap_or_else(|e| panic!("with server {victim} dead (round {round}): {e}"));
        println!(
            "server {victim} killed (round {round}): patterns written and read back in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        check(&format!("with server {victim} dead"));
        c.spawn(Daemon::Server(victim)).unwrap();
        wait_quiet(&c, Duration::from_secs(60));
        qemu_io_patterns(&url, size)
            .unwrap_or_else(|e| panic!("after server {victim} restarted: {e}"));
        check(&format!("after server {victim} restarted"));
    }
    let mds = c.status(Daemon::Mds).unwrap();
    assert!(mds["stats"]["reassignments"].as_u64().unwrap() > 0, "{mds}");
}

#[test]
fn killing_the_last_awake_replica_in_gear_1_costs_latency_not_errors() {
    if !have("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut c = start_cluster(dir.path());
    let (_vol, url) = start_volume(&c, "gear1", "32m");
    qemu(&url, &["write -P 0x61 0 8M"]).unwrap_or_else(|e| panic!("{e}"));
    c.gear("1").unwrap();
    wait_gear_1(&c);
    // Written in gear 1: logged (the other replicas sleep).
    qemu(&url, &["write -P 0x62 8M 8M"]).unwrap_or_else(|e| panic!("{e}"));
    let (victim, primaries) = awake_servers(&c)
        .into_iter()
        .max_by_key(|&(_, p)| p)
        .unwrap();
    c.kill(Daemon::Server(victim));
    // Its groups have no replica awake: the MDS wakes their peers and gives them primaries;
    // the client retries meanwhile.
    let t = Instant::now();
    qemu(
        &url,
        &[
            "read -P 0x61 0 8M",
            "read -P 0x62 8M 8M",
            "write -P 0x63 16M 8M",
            "read -P 0x63 16M 8M",
        ],
    )
    .unwrap_or_else(|e| panic!("with server {victim} ({primaries} primaries) dead: {e}"));
    let waited = t.elapsed();
    println!(
        "gear 1, server {victim} (primary of {primaries} groups, the last awake replica of each) killed: every read and write served after {:.1} s",
        waited.as_secs_f64()
    );
    let mds = c.status(Daemon::Mds).unwrap();
    assert!(mds["stats"]["suspicions"].as_u64().unwrap() >= 1, "{mds}");
    c.spawn(Daemon::Server(victim)).unwrap();
    c.gear("3").unwrap();
    wait_quiet(&c, Duration::from_secs(60));
    qemu(
        &url,
        &[
            "read -P 0x61 0 8M",
            "read -P 0x62 8M 8M",
            "read -P 0x63 16M 8M",
        ],
    )
    .unwrap_or_else(|e| panic!("after the restart: {e}"));
}

/// Logged and at-risk bytes summed over the chunk servers; `u64::MAX` while a server does not
/// answer (a loaded machine can be slow to), so that a wait never mistakes silence for zero.
fn logged_and_at_risk(c: &LocalCluster) -> (u64, u64) {
    (0..c.servers())
        .map(|s| {
            c.status(Daemon::Server(s))
                .map_or((u64::MAX, u64::MAX), |st| {
                    (
                        st["logged_bytes"].as_u64().unwrap_or(u64::MAX),
                        st["at_risk_bytes"].as_u64().unwrap_or(u64::MAX),
                    )
                })
        })
        .fold((0, 0), |(a, b), (x, y)| {
            (a.saturating_add(x), b.saturating_add(y))
        })
}

/// Two loggers per rack: a logged write has one copy per rack, on either of its loggers, so a
/// dead logger leaves part of the logged data with two live copies (at risk) and the rest with
/// three. When the gear goes up, the at-risk data must be reclaimed first (§3.7: "at high
/// priority"): the servers' at-risk gauge reaches zero while much of the rest is still logged.
#[test]
fn a_logger_killed_in_logging_mode_loses_nothing_and_its_at_risk_data_is_reclaimed_first() {
    if !have("qemu-io") || !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        wake_seconds: 0.5,
        loggers_per_rack: 2,
        // Modelled disks, so that reclaim takes long enough to be watched.
        emulate: Some("sierra-1tb".into()),
        ..ClusterOptions::default()
    };
    let mut c =
        LocalCluster::start(binary(), dir.path(), options).unwrap_or_else(|e| panic!("{e}"));
    let (_vol, url) = start_volume(&c, "logger", "64m");
    c.gear("1").unwrap();
    wait_gear_1(&c);
    // Concurrent writes from every group, so that both loggers of each rack take copies.
    fio(
        &url,
        &[
            "--rw=randwrite",
            "--bs=64k",
            "--size=48m",
            "--iodepth=16",
            "--do_verify=0",
        ],
    );
    // Every block reads back as fio wrote it (its verify pass over the same offsets).
    let verify_all = || {
        fio(
            &url,
            &[
                "--rw=randwrite",
                "--bs=64k",
                "--size=48m",
                "--verify_only=1",
            ],
        );
    };
    let (logged, at_risk) = logged_and_at_risk(&c);
    assert!(logged >= 32 << 20, "written in gear 1 and logged: {logged}");
    assert_eq!(at_risk, 0, "every logger is up");
    c.kill(Daemon::Logger(0));
    let deadline = Instant::now() + Duration::from_secs(30);
    let (logged, at_risk) = loop {
        let (logged, at_risk) = logged_and_at_risk(&c);
        if at_risk > 0 {
            break (logged, at_risk);
        }
        assert!(Instant::now() < deadline, "no data at risk after the kill");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        at_risk < logged,
        "part of the logged data has no copy on logger 0: {at_risk} of {logged} at risk"
    );
    // `cluster status` shows the at-risk bytes and the dead logger among the six.
    let out = Command::new(binary())
        .args(["cluster", "status", "--dir", &c.dir.display().to_string()])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && table.contains("at risk")
            && table.lines().filter(|l| l.contains("unreachable")).count() == 1
            && table.lines().filter(|l| l.contains(" r2 ")).count() >= 3,
        "{table}"
    );
    // Every block still reads back from the two live copies.
    verify_all();
    let before = reclaim_counters(&c);
    c.gear("3").unwrap();
    let t = Instant::now();
    let watch = watch_reclaim(&c, &before, (logged, at_risk));
    let all = t.elapsed();
    let after = reclaim_counters(&c);
    let reclaimed: u64 = after.iter().zip(&before).map(|(x, y)| x.0 - y.0).sum();
    let reclaimed_at_risk: u64 = after.iter().zip(&before).map(|(x, y)| x.1 - y.1).sum();
    let sum = |per: &Reclaimed| -> (u64, u64) {
        per.iter()
            .fold((0, 0), |(r, safe), x| (r + x.0, safe + x.0 - x.1))
    };
    let (held, safe_held) = sum(&watch.held);
    let (during, safe_during) = sum(&watch.reclaiming);
    let safe_first: u64 = watch.safe_before_own_at_risk.iter().sum();
    let mib = |b: u64| b as f64 / 1048576.0;
    println!(
        "logger 0 of 6 killed with {:.1} MiB logged, {:.1} MiB of it at risk: {:.1} MiB reclaimed, {:.1} MiB of it at risk; while reclaiming at-risk data a server reclaimed {:.1} MiB, {:.2} MiB of it not at risk (while holding any: {:.1} MiB, {:.2} MiB not at risk); {:.1} MiB not at risk reclaimed before their server's at-risk data; none at risk {:.2} s after the gear went up; all reclaimed in {:.2} s, the logger still dead",
        mib(logged),
        mib(at_risk),
        mib(reclaimed),
        mib(reclaimed_at_risk),
        mib(during),
        mib(safe_during),
        mib(held),
        mib(safe_held),
        mib(safe_first),
        watch.none_at_risk_after.unwrap_or(all).as_secs_f64(),
        all.as_secs_f64()
    );
    assert!(
        reclaimed >= logged && reclaimed_at_risk >= at_risk,
        "everything reclaimed, the at-risk data counted as such: {reclaimed} ({reclaimed_at_risk} at risk) of {logged} ({at_risk})"
    );
    // At-risk data first: a server reclaiming some reclaims little else meanwhile (a quarter at
    // most, over the looks at it in which it reclaimed at-risk data: a job of
    // other data already running when a group's at-risk data becomes reclaimable finishes;
    // a group whose replicas are not yet all available cannot reclaim its at-risk data, and
    // its server's other groups may meanwhile, so holding at-risk data is not the measure).
    assert!(
        during > 0 && safe_during * 4 <= during,
        "while reclaiming at-risk data servers reclaimed {during} bytes, {safe_during} of them not at risk"
    );
    // And at-risk data waits behind little: until each server had reclaimed its own at-risk
    // data, the servers reclaimed less than half of the rest.
    assert!(
        safe_first * 2 <= logged - at_risk,
        "{safe_first} bytes not at risk reclaimed before their server's at-risk data, of {}",
        logged - at_risk
    );
    verify_all();
    c.spawn(Daemon::Logger(0)).unwrap();
    wait_quiet(&c, Duration::from_secs(60));
    qemu(&url, &["write -P 0x72 0 4M", "read -P 0x72 0 4M"])
        .unwrap_or_else(|e| panic!("logger back: {e}"));
}

/// Per server: (bytes reclaimed, of which at risk, at-risk bytes held now). Counters, not
/// gauges: primaries move at the up-shift.
fn reclaim_counters(c: &LocalCluster) -> Vec<(u64, u64, u64)> {
    (0..c.servers())
        .map(|s| {
            let st = c
                .status(Daemon::Server(s))
                .unwrap_or_else(|e| panic!("{e}"));
            (
                st["stats"]["reclaimed_bytes"].as_u64().unwrap(),
                st["stats"]["reclaimed_at_risk_bytes"].as_u64().unwrap(),
                st["at_risk_bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// What a server reclaimed (bytes, and of them at risk) in the looks at it that matched.
type Reclaimed = Vec<(u64, u64)>;

/// What [`watch_reclaim`] saw of the reclaim after the up-shift.
struct ReclaimWatch {
    /// Per server, what it reclaimed between two looks that both saw it hold at-risk data.
    held: Reclaimed,
    /// Per server, what it reclaimed between two looks in which it reclaimed at-risk data.
    reclaiming: Reclaimed,
    /// Per server, the bytes not at risk it had reclaimed at the last look that saw it hold
    /// at-risk data (servers share no reclaim budget: each one's own order is the measure).
    safe_before_own_at_risk: Vec<u64>,
    none_at_risk_after: Option<Duration>,
}

/// Watches the reclaim after the up-shift until nothing is logged and all of it, the at-risk
/// part counted as such, was reclaimed (2 minutes at most).
fn watch_reclaim(
    c: &LocalCluster,
    before: &[(u64, u64, u64)],
    (logged, at_risk): (u64, u64),
) -> ReclaimWatch {
    let t = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut watch = ReclaimWatch {
        held: vec![(0, 0); before.len()],
        reclaiming: vec![(0, 0); before.len()],
        safe_before_own_at_risk: vec![0; before.len()],
        none_at_risk_after: None,
    };
    let mut previous = before.to_vec();
    loop {
        let now = reclaim_counters(c);
        for (s, (&(r, a, risk), &(r0, a0, risk0))) in now.iter().zip(&previous).enumerate() {
            // A group still recovering its log does not know yet that data is at risk; one
            // whose replicas are not all available yet holds at-risk data it cannot reclaim
            // (its server's other groups may meanwhile).
            if risk0 > 0 && risk > 0 {
                watch.held[s].0 += r - r0;
                watch.held[s].1 += a - a0;
            }
            if a > a0 {
                watch.reclaiming[s].0 += r - r0;
                watch.reclaiming[s].1 += a - a0;
            }
            if risk > 0 {
                let (r_first, a_first, _) = before[s];
                watch.safe_before_own_at_risk[s] = (r - r_first) - (a - a_first);
            }
        }
        previous = now.clone();
        if watch.none_at_risk_after.is_none() && now.iter().all(|x| x.2 == 0) {
            watch.none_at_risk_after = Some(t.elapsed());
        }
        // Done when nothing is logged and the counters say all of it was reclaimed: the
        // gauges alone read zero for a moment while a group that moved recovers its log.
        let reclaimed: u64 = now.iter().zip(before).map(|(x, y)| x.0 - y.0).sum();
        let reclaimed_at_risk: u64 = now.iter().zip(before).map(|(x, y)| x.1 - y.1).sum();
        let (now_logged, now_at_risk) = logged_and_at_risk(c);
        if now_logged == 0
            && now_at_risk == 0
            && reclaimed >= logged
            && reclaimed_at_risk >= at_risk
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{now_logged} bytes still logged ({now_at_risk} at risk); {reclaimed} of {logged} reclaimed ({reclaimed_at_risk} of {at_risk} at risk)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    watch
}

/// Runs the binary to its end; its exit status and standard error.
fn run_to_end(args: &[&str]) -> (bool, String) {
    let out = Command::new(binary())
        .args(args)
        .output_within(COMMAND_LIMIT)
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_input_and_unreachable_peers_get_clear_errors_and_crash_nothing() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let nobody = free_addr().unwrap().to_string();
    // No MDS there.
    let (ok, err) = run_to_end(&[
        "volume",
        "serve",
        "--cluster",
        &nobody,
        "--object",
        "x",
        "--size",
        "1m",
    ]);
    assert!(!ok && err.contains("unreachable"), "{err}");
    let server_dir = dir.path().join("s").display().to_string();
    let (ok, err) = run_to_end(&[
        "cluster",
        "server",
        "--dir",
        &server_dir,
        "--mds",
        &nobody,
        "--id",
        "0",
    ]);
    assert!(!ok && err.contains("unreachable"), "{err}");
    let (ok, err) = run_to_end(&["cluster", "gear", "2", "--mds", &nobody]);
    assert!(!ok && err.contains("unreachable"), "{err}");
    // An MDS directory without a spec.
    let empty = dir.path().join("empty").display().to_string();
    let (ok, err) = run_to_end(&["cluster", "mds", "--dir", &empty]);
    assert!(!ok && err.contains("--spec"), "{err}");

    let c = start_cluster(&dir.path().join("c"));
    // A server id the spec does not have, a rack that is not the spec's.
    let (ok, err) = run_to_end(&[
        "cluster",
        "server",
        "--dir",
        &server_dir,
        "--mds",
        &c.mds_addr(),
        "--id",
        "17",
    ]);
    assert!(!ok && err.contains("not 17"), "{err}");
    let (ok, err) = run_to_end(&[
        "cluster",
        "server",
        "--dir",
        &server_dir,
        "--mds",
        &c.mds_addr(),
        "--id",
        "0",
        "--rack",
        "r2",
    ]);
    assert!(!ok && err.contains("rack"), "{err}");
    let (ok, err) = run_to_end(&["cluster", "gear", "7", "--mds", &c.mds_addr()]);
    assert!(!ok && err.contains("outside"), "{err}");
    // An object that does not exist, without --size.
    let nbd = free_addr().unwrap().to_string();
    let (ok, err) = run_to_end(&[
        "volume",
        "serve",
        "--cluster",
        &c.mds_addr(),
        "--object",
        "nope",
        "--nbd",
        &nbd,
    ]);
    assert!(!ok && err.contains("--size"), "{err}");
    // Garbage, a frame too long, and a hello of another cluster, to the MDS and a server:
    // each connection is refused or closed; the daemons go on.
    for target in [c.mds_addr(), c.addr(Daemon::Server(0))] {
        for bytes in [
            b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            u32::MAX.to_le_bytes().to_vec(),
            {
                let mut b = Vec::new();
                cordillera_wire::sierra::encode(
                    &cordillera_wire::sierra::Frame::Hello {
                        cluster: 12345,
                        from: cordillera_gears::protocol::Endpoint::Server(0),
                        incarnation: 1,
                    },
                    &mut b,
                );
                b
            },
        ] {
            let mut s = std::net::TcpStream::connect(&target).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(&bytes).unwrap();
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
        }
    }
    let mds = c.status(Daemon::Mds).unwrap();
    assert_eq!(mds["groups_without_primary"], 0, "{mds}");
    c.status(Daemon::Server(0)).unwrap();
    // Loggers report their rack and load too.
    let logger = c.status(Daemon::Logger(1)).unwrap();
    assert_eq!(logger["rack"], "r1", "{logger}");
    assert!(logger["queue_length"].is_u64(), "{logger}");
    // And their power by the server model: always up, idle watts at least.
    let power = &logger["power"];
    assert_eq!(power["state"], "up", "{logger}");
    let (up_s, busy_s, energy_j) = (
        power["up_s"].as_f64().unwrap(),
        power["busy_s"].as_f64().unwrap(),
        power["energy_j"].as_f64().unwrap(),
    );
    assert!(up_s > 0.0 && busy_s <= up_s, "{power}");
    let idle_w = cordillera_models::power::PowerParams::default().idle_w;
    assert!(energy_j >= idle_w * up_s * 0.999, "{power}");
    // `cluster status` shows the servers and the loggers.
    let out = Command::new(binary())
        .args(["cluster", "status", "--dir", &c.dir.display().to_string()])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        table.contains("primaries")
            && table.lines().filter(|l| l.starts_with("logger ")).count() == 1
            && table.contains(" r2 "),
        "{table}"
    );
    drop(c);

    // Corrupt MDS state: the MDS refuses to start, naming the file.
    let state = dir.path().join("c/mds/mds.redb");
    let mut bytes = std::fs::read(&state).unwrap();
    for b in bytes.iter_mut().skip(512).step_by(97) {
        *b ^= 0x5a;
    }
    std::fs::write(&state, &bytes).unwrap();
    let mds_dir = dir.path().join("c/mds").display().to_string();
    let (ok, err) = run_to_end(&["cluster", "mds", "--dir", &mds_dir]);
    assert!(!ok && err.contains("MDS state"), "{err}");
}

#[test]
fn pgbench_on_ext4_on_the_cluster_through_a_down_shift_and_an_up_shift() {
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
    if std::fs::read_dir("/usr/lib/postgresql").is_err() {
        cordillera_testkit::missing("PostgreSQL is not installed (scripts/test.sh installs it)");
        return;
    }
    if !have("nbdfuse") || !have("losetup") {
        return;
    }
    let out = Command::new(binary())
        .args([
            "cluster",
            "pgbench",
            "--seconds",
            "15",
            "--scale",
            "2",
            "--clients",
            "4",
        ])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    if text.contains("FUSE") || text.contains("losetup cannot attach") {
        cordillera_testkit::missing(
            "this machine cannot attach an NBD export as a loop device (FUSE, loop devices)",
        );
        return;
    }
    assert!(out.status.success(), "{text}");
    assert!(text.contains("e2fsck -fn: clean"), "{text}");
    assert!(
        text.contains("gear 1 at") && text.contains("gear 3 at"),
        "{text}"
    );
}

#[test]
fn a_permanently_failed_server_is_rebuilt_onto_its_gear_group_and_nothing_is_lost() {
    if !have("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        wake_seconds: 0.5,
        logger_size: "256m".into(),
        permanent_after_s: 3,
        ..ClusterOptions::default()
    };
    let mut c =
        LocalCluster::start(binary(), dir.path(), options).unwrap_or_else(|e| panic!("{e}"));
    let (_vol, url) = start_volume(&c, "rebuild", "64m");
    qemu(&url, &["write -P 0x41 0 64M"]).unwrap_or_else(|e| panic!("{e}"));
    c.kill(Daemon::Server(0));
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(120);
    let mut declared = None;
    let mds = loop {
        let mds = c.status(Daemon::Mds).unwrap();
        let stats = &mds["stats"];
        if declared.is_none() && stats["permanent_failures"].as_u64().unwrap() >= 1 {
            declared = Some(Instant::now());
        }
        let started = stats["rebuilds_started"].as_u64().unwrap();
        if started > 0 && stats["rebuilds_done"].as_u64().unwrap() == started {
            break mds;
        }
        assert!(Instant::now() < deadline, "rebuild not done: {mds}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = declared.map_or(0.0, |d| d.elapsed().as_secs_f64());
    let rebuilt: u64 = (1..c.servers())
        .map(|s| {
            c.status(Daemon::Server(s)).unwrap()["stats"]["rebuilt_bytes"]
                .as_u64()
                .unwrap()
        })
        .sum();
    println!(
        "server 0 failed for good: declared after {:.1} s of silence, {} groups rebuilt onto its gear group, {rebuilt} bytes copied in {took:.1} s ({:.1} MB/s, this machine's disk)",
        killed.elapsed().as_secs_f64() - took,
        mds["stats"]["rebuilds_done"],
        rebuilt as f64 / took.max(1e-3) / 1e6
    );
    assert!(rebuilt > 0, "{mds}");
    // Every group has three live replicas again: a second server of another rack can go.
    c.kill(Daemon::Server(3));
    qemu(&url, &["read -P 0x41 0 64M"]).unwrap_or_else(|e| panic!("after the rebuild: {e}"));
}

/// SIGKILLs at moments drawn from a fresh seed each run (printed; `CLUSTER_KILL_SEED=N`
/// repeats it): the MDS, a chunk server or a logger, each started again after a pause, with the
/// gear set at random moments too, while fio writes with `--verify=crc32c` and reads back;
/// afterwards, in the top gear with the loggers empty, every block is verified again.
#[test]
fn sigkills_at_random_moments_lose_nothing_acknowledged() {
    if !have("fio") {
        return;
    }
    let seed = std::env::var("CLUSTER_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("kill campaign seed {seed} (CLUSTER_KILL_SEED={seed} repeats its moments)");
    let mut rng = cordillera_types::rng::SimRng::new(seed, 1);
    let dir = tempfile::tempdir().unwrap();
    let mut c = start_cluster(dir.path());
    // The volume with its figures on HTTP (retries are counted there).
    let metrics = free_addr().unwrap();
    let (_vol, url) = c
        .start_volume("kills", "48m", &["--metrics", &metrics.to_string()])
        .unwrap_or_else(|e| panic!("{e}"));
    // Four passes over the volume, each with its own pattern and verified as it ends; the last
    // one's is verified again at the end.
    let job = ["--rw=randwrite", "--bs=4k-64k", "--size=48m"];
    let passes = 4;
    let writer = {
        let url = url.clone();
        std::thread::spawn(move || {
            for pass in 0..passes {
                let seed = format!("--randseed={}", 7 + pass);
                let mut args = job.to_vec();
                args.push(&seed);
                fio(&url, &args);
            }
        })
    };
    let mut events = Vec::new();
    let started = Instant::now();
    while !writer.is_finished() && events.len() < 16 {
        std::thread::sleep(Duration::from_millis(300 + rng.below(2000)));
        if rng.below(3) == 0 {
            let gear = ["1", "2", "3"][rng.below(3) as usize];
            c.gear(gear).unwrap_or_else(|e| panic!("gear {gear}: {e}"));
            events.push(format!(
                "{:.1} s gear {gear}",
                started.elapsed().as_secs_f64()
            ));
        }
        let victim = match rng.below(4) {
            0 => Daemon::Mds,
            1 => Daemon::Logger(rng.below(3) as usize),
            _ => Daemon::Server(rng.below(c.servers() as u64) as u32),
        };
        c.kill(victim);
        let down = 200 + rng.below(1500);
        events.push(format!(
            "{:.1} s kill {victim:?} for {down} ms",
            started.elapsed().as_secs_f64()
        ));
        std::thread::sleep(Duration::from_millis(down));
        c.spawn(victim)
            .unwrap_or_else(|e| panic!("{victim:?} again: {e}"));
    }
    // fio checks every block it wrote as it finishes (a failure panics in its thread).
    writer
        .join()
        .unwrap_or_else(|_| panic!("seed {seed}, after {events:?}"));
    c.gear("3").unwrap();
    wait_quiet(&c, Duration::from_secs(90));
    let last = format!("--randseed={}", 7 + passes - 1);
    let mut verify: Vec<&str> = job.to_vec();
    verify.extend([last.as_str(), "--verify_only"]);
    fio(&url, &verify);
    let volume: serde_json::Value = serde_json::from_str(
        &cordillera_testkit::cluster::http_get(&metrics.to_string(), "/status").unwrap(),
    )
    .unwrap();
    assert!(volume["client"]["requests"].as_u64() > Some(0), "{volume}");
    assert_eq!(volume["failed"], 0, "{volume}");
    println!(
        "seed {seed}: {} events in {:.1} s, every block verified during and after; the volume's client: {}; events: {events:?}",
        events.len(),
        started.elapsed().as_secs_f64(),
        volume["client"]
    );
    assert!(!events.is_empty(), "fio finished before any kill");
}

/// nbdcopy into a cluster object and out again, the gear going down to 1 between the two:
/// byte-identical.
#[test]
fn nbdcopy_copies_in_and_out_of_a_cluster_object_across_a_down_shift() {
    if !have("nbdcopy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = start_cluster(&dir.path().join("c"));
    let (_vol, url) = start_volume(&c, "copy", "24m");
    let input = dir.path().join("in.img");
    let output = dir.path().join("out.img");
    let data: Vec<u8> = (0..24u64 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&input, &data).unwrap();
    let copy = |from: &str, to: &str| {
        let out = Command::new("nbdcopy")
            .args([from, to])
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(
            out.status.success(),
            "nbdcopy {from} {to}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    copy(input.to_str().unwrap(), &url);
    c.gear("1").unwrap();
    wait_gear_1(&c);
    copy(&url, output.to_str().unwrap());
    assert!(
        std::fs::read(&output).unwrap() == data,
        "the copy out differs"
    );
}

/// Loggers of 16 MiB in gear 1, sent 32 MiB: once they refuse writes as full, the primaries
/// answer "busy" and the client sends the writes again (no ENOSPC for the 5 s the loggers are
/// given), while the heartbeats name the groups and the MDS wakes their replicas; the writes
/// then go to the replicas and every one is acknowledged, none failed, none hung. Every write
/// reads back, in gear 1 and after the gear goes up and the loggers drain. (Loggers full for
/// longer answer ENOSPC: `cargo nextest run -p cordillera-gears a_write_the_full_loggers`.)
#[test]
fn full_loggers_wake_the_replicas_and_writes_wait_instead_of_failing() {
    if !have("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        wake_seconds: 0.5,
        logger_size: "16m".into(),
        ..ClusterOptions::default()
    };
    let c = LocalCluster::start(binary(), dir.path(), options).unwrap_or_else(|e| panic!("{e}"));
    // The volume's /status says which requests wait and how often they were sent again.
    let metrics = free_addr().unwrap().to_string();
    let (vol, url) = c
        .start_volume("full", "48m", &["--metrics", &metrics])
        .unwrap_or_else(|e| panic!("{e}"));
    qemu(&url, &["write -P 0x41 0 32M"]).unwrap_or_else(|e| panic!("{e}"));
    c.gear("1").unwrap();
    wait_gear_1(&c);
    for mib in 0..32u64 {
        qemu(&url, &[&format!("write -P 0x42 {mib}M 1M")]).unwrap_or_else(|e| {
            let logs = last_words(&c, &vol, 40);
            let volume = cordillera_testkit::cluster::http_get(&metrics, "/status");
            panic!(
                "MiB {mib} in gear 1 with full loggers: {e}\n{logs}\n--- volume status\n{volume:?}"
            )
        });
    }
    let full: u64 = (0..c.options.racks)
        .map(|i| {
            c.status(Daemon::Logger(i)).unwrap()["full_refusals"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert!(full > 0, "no logger refused a write for want of room");
    let mds = c.status(Daemon::Mds).unwrap();
    let wakes = mds["stats"]["log_full_wakes"].as_u64().unwrap();
    assert!(
        wakes > 0,
        "the MDS woke no replicas for the full loggers: {}",
        mds["stats"]
    );
    qemu(&url, &["read -P 0x42 0 32M"]).unwrap_or_else(|e| panic!("in gear 1: {e}"));
    c.gear("3").unwrap();
    wait_quiet(&c, Duration::from_secs(90));
    qemu(&url, &["read -P 0x42 0 32M", "read -P 0 32M 16M"])
        .unwrap_or_else(|e| panic!("after the gear went up: {e}"));
    qemu(&url, &["write -P 0x43 0 48M", "read -P 0x43 0 48M"])
        .unwrap_or_else(|e| panic!("after the loggers drained: {e}"));
    println!(
        "gear 1 with 16 MiB loggers: 32 MiB acknowledged, {full} full refusals at the loggers, {wakes} log-full wakes; all read back"
    );
}
