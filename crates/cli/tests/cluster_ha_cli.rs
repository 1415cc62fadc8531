//! The MDS highly available on etcd, on real processes: three etcd members (the Debian
//! package's `etcd`) and three `cluster mds --etcd` processes, one active; fio writes and
//! verifies through `volume serve --cluster` while the active MDS is killed or paused past its
//! lease, and while etcd loses a member or its quorum.

mod cluster;

use std::time::{Duration, Instant};

use cordillera_testkit::cluster::{ClusterOptions, Daemon, LocalCluster};
use cordillera_testkit::process::{fio_verify as fio, have, signal};

use cluster::{binary, qemu, random_writes_verified, start_volume};

/// The MDS's lease in etcd in these tests.
const LEASE_S: u64 = 2;

fn start_ha(dir: &std::path::Path) -> LocalCluster {
    let options = ClusterOptions {
        wake_seconds: 0.5,
        // A chunk server silent this long is rebuilt elsewhere.
        permanent_after_s: 3,
        logger_size: "256m".into(),
        mds: 3,
        etcd: 3,
        mds_lease_s: LEASE_S,
        ..ClusterOptions::default()
    };
    LocalCluster::start(binary(), dir, options).unwrap_or_else(|e| panic!("{e}"))
}

fn mds_daemons(c: &LocalCluster) -> Vec<Daemon> {
    std::iter::once(Daemon::Mds)
        .chain((1..c.options.mds).map(Daemon::MdsPeer))
        .collect()
}

/// The MDS that answers `/status` as the active one (a standby says `"role": "standby"`).
fn active(c: &LocalCluster, except: Option<Daemon>) -> Option<Daemon> {
    mds_daemons(c)
        .into_iter()
        .filter(|&d| Some(d) != except)
        .find(|&d| c.status(d).is_ok_and(|s| s.get("servers").is_some()))
}

/// Waits for an active MDS other than `except`; how long it took.
fn wait_active(c: &LocalCluster, except: Option<Daemon>, limit: Duration) -> (Daemon, Duration) {
    let start = Instant::now();
    loop {
        if let Some(d) = active(c, except) {
            return (d, start.elapsed());
        }
        assert!(
            start.elapsed() < limit,
            "no active MDS after {limit:?}; logs:\n{}",
            mds_daemons(c)
                .iter()
                .map(|&d| format!("{d:?}:\n{}", c.log(d)))
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sets a gear by hand through the MDS's address list and waits until the active MDS's
/// status shows it.
fn shift_to(c: &LocalCluster, gear: u64) {
    c.gear(&gear.to_string())
        .unwrap_or_else(|e| panic!("cluster gear {gear}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = active(c, None).expect("an active MDS");
        let s = c.status(d).unwrap();
        if s["gear"].as_u64() == Some(gear) {
            return;
        }
        assert!(Instant::now() < deadline, "gear {gear} not taken: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A stat of the active MDS's `/status`.
fn mds_stat(c: &LocalCluster, name: &str) -> u64 {
    let d = active(c, None).expect("an active MDS");
    c.status(d).unwrap()["stats"][name].as_u64().unwrap_or(0)
}

/// (a) The active MDS SIGKILLed under fio: a standby takes over within the lease and a few
/// seconds, gears shift under it and a failed chunk server is rebuilt under it; (b) the new
/// active one SIGSTOPped past its lease, then resumed: another takes over, and the paused one,
/// resumed, steps down without storing anything.
#[test]
fn a_killed_or_paused_active_mds_is_replaced_and_nothing_is_lost() {
    if !have("fio") || !have("etcd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut c = start_ha(dir.path());
    let (first, _) = wait_active(&c, None, Duration::from_secs(30));
    let (_vol, url) = start_volume(&c, "ha", "64m");
    fio(
        &url,
        &["--rw=write", "--bs=64k", "--size=64m", "--do_verify=1"],
    );

    // (a) SIGKILL.
    let writer = {
        let url = url.clone();
        std::thread::spawn(move || random_writes_verified(&url, 12))
    };
    std::thread::sleep(Duration::from_secs(3));
    c.kill(first);
    let (second, failover) = wait_active(&c, Some(first), Duration::from_secs(30));
    let text = writer.join().unwrap();
    assert!(text.contains("err= 0"), "{text}");
    shift_to(&c, 1);
    shift_to(&c, 3);
    // A chunk server lost for good: the new active MDS has it rebuilt.
    let rebuilt_before = mds_stat(&c, "rebuilds_done");
    c.kill(Daemon::Server(5));
    let deadline = Instant::now() + Duration::from_secs(90);
    while mds_stat(&c, "rebuilds_done") == rebuilt_before {
        assert!(Instant::now() < deadline, "no rebuild under the new MDS");
        std::thread::sleep(Duration::from_millis(250));
    }
    c.spawn(first).unwrap_or_else(|e| panic!("{e}"));

    // (b) SIGSTOP past the lease, then SIGCONT.
    let writer = {
        let url = url.clone();
        std::thread::spawn(move || random_writes_verified(&url, 14))
    };
    std::thread::sleep(Duration::from_secs(2));
    let pid = c.pid(second).unwrap();
    signal(pid, "STOP").unwrap();
    let (third, paused_failover) = wait_active(&c, Some(second), Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(1));
    let paused_log = c.log(second).len();
    signal(pid, "CONT").unwrap();
    let text = writer.join().unwrap();
    assert!(text.contains("err= 0"), "{text}");
    // Resumed, it finds its lease lapsed and stands by: it is not active, and says why.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !c.log(second).contains("stepping down") {
        assert!(
            Instant::now() < deadline,
            "the paused MDS did not step down:\n{}",
            c.log(second)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(active(&c, None), Some(third), "one active MDS");
    // Resumed, it stored nothing: the steps it held were never offered to etcd.
    let resumed = &c.log(second)[paused_log..];
    assert!(
        !resumed.contains("etcd took the steps"),
        "the deposed MDS stored steps:\n{resumed}"
    );
    shift_to(&c, 1);
    shift_to(&c, 3);
    qemu(&url, &["write -P 0x5a 0 64M", "read -P 0x5a 0 64M"])
        .unwrap_or_else(|e| panic!("after the failovers: {e}"));
    assert_eq!(c.exited(), Vec::new(), "no daemon stopped on its own");
    println!(
        "MDS failover under fio: SIGKILL {:.2} s, SIGSTOP {:.2} s (lease {LEASE_S} s); every block verified",
        failover.as_secs_f64(),
        paused_failover.as_secs_f64()
    );
    assert!(
        failover < Duration::from_secs(LEASE_S + 8),
        "failover took {failover:?}"
    );
}

/// (c) An etcd member SIGKILLed and started again, (d) etcd without a quorum (two members
/// SIGSTOPped) under fio: the active MDS stays, clients read and write through the chunk
/// servers they have, and when the quorum returns the MDS changes state again (a gear shift).
#[test]
fn etcd_losing_a_member_or_its_quorum_stops_no_client() {
    if !have("fio") || !have("etcd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut c = start_ha(dir.path());
    let (leader, _) = wait_active(&c, None, Duration::from_secs(30));
    let (_vol, url) = start_volume(&c, "quorum", "64m");
    fio(
        &url,
        &["--rw=write", "--bs=64k", "--size=64m", "--do_verify=1"],
    );

    // (c) One member killed and started again.
    let writer = {
        let url = url.clone();
        std::thread::spawn(move || random_writes_verified(&url, 10))
    };
    std::thread::sleep(Duration::from_secs(2));
    c.kill(Daemon::Etcd(0));
    std::thread::sleep(Duration::from_secs(3));
    c.spawn(Daemon::Etcd(0)).unwrap_or_else(|e| panic!("{e}"));
    let text = writer.join().unwrap();
    assert!(text.contains("err= 0"), "{text}");
    assert_eq!(active(&c, None), Some(leader), "the MDS stayed active");
    shift_to(&c, 1);
    shift_to(&c, 3);

    // (d) No quorum for longer than several leases.
    let writer = {
        let url = url.clone();
        std::thread::spawn(move || random_writes_verified(&url, 14))
    };
    std::thread::sleep(Duration::from_secs(2));
    let stopped: Vec<u32> = [1, 2]
        .iter()
        .map(|&j| c.pid(Daemon::Etcd(j)).unwrap())
        .collect();
    for &pid in &stopped {
        signal(pid, "STOP").unwrap();
    }
    std::thread::sleep(Duration::from_secs(4 * LEASE_S));
    let during = active(&c, None);
    for &pid in &stopped {
        signal(pid, "CONT").unwrap();
    }
    let text = writer.join().unwrap();
    assert!(text.contains("err= 0"), "{text}");
    assert_eq!(
        during,
        Some(leader),
        "the MDS held on without a quorum:\n{}",
        c.log(leader)
    );
    for j in 0..3 {
        c.wait_etcd_healthy(j, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    shift_to(&c, 1);
    shift_to(&c, 3);
    qemu(&url, &["write -P 0x3c 0 64M", "read -P 0x3c 0 64M"])
        .unwrap_or_else(|e| panic!("after etcd's quorum returned: {e}"));
    assert_eq!(c.exited(), Vec::new(), "no daemon stopped on its own");
}

/// The active MDS SIGKILLed again and again (`MDS_FAILOVERS` times, 3 by default; the
/// campaign in docs/USAGE.md runs 20) while fio writes and verifies: every time a standby takes
/// over; the failover times (kill to a new active MDS answering) as min, median and max.
#[test]
fn active_mds_killed_again_and_again_fails_over_every_time() {
    if !have("fio") || !have("etcd") {
        return;
    }
    let rounds: usize = std::env::var("MDS_FAILOVERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let mut c = start_ha(dir.path());
    wait_active(&c, None, Duration::from_secs(30));
    let (_vol, url) = start_volume(&c, "campaign", "64m");
    fio(
        &url,
        &["--rw=write", "--bs=64k", "--size=64m", "--do_verify=1"],
    );
    let mut times = Vec::new();
    for round in 0..rounds {
        let (leader, _) = wait_active(&c, None, Duration::from_secs(30));
        let writer = {
            let url = url.clone();
            std::thread::spawn(move || random_writes_verified(&url, 4 + LEASE_S as u32 + 2))
        };
        std::thread::sleep(Duration::from_secs(2));
        c.kill(leader);
        let (_, took) = wait_active(&c, Some(leader), Duration::from_secs(30));
        times.push(took);
        let text = writer.join().unwrap();
        assert!(text.contains("err= 0"), "round {round}: {text}");
        c.spawn(leader).unwrap_or_else(|e| panic!("{e}"));
    }
    qemu(&url, &["write -P 0x66 0 64M", "read -P 0x66 0 64M"])
        .unwrap_or_else(|e| panic!("after {rounds} failovers: {e}"));
    assert_eq!(c.exited(), Vec::new(), "no daemon stopped on its own");
    times.sort();
    println!(
        "{rounds} MDS failovers under fio (lease {LEASE_S} s): min {:.2} s, median {:.2} s, max {:.2} s; every block verified",
        times[0].as_secs_f64(),
        times[times.len() / 2].as_secs_f64(),
        times[times.len() - 1].as_secs_f64()
    );
}
