//! Sierra on real processes under the faults that are not kills: a chunk server whose disk
//! returns EIO (nbdkit's `error` filter under nbdfuse), a chunk server cut off from the MDS for
//! longer than its lease while its clients still reach it (a proxy that pauses the link), and a
//! logger unreachable for longer than a lease while writes are logged. Every acknowledged write
//! reads back; a deposed primary changes nothing.

mod cluster;

use std::time::{Duration, Instant};

use cordillera_faults::{FaultyDevice, LinkProxy};
use cordillera_testkit::cluster::{ClusterOptions, Daemon, LocalCluster};
use cordillera_testkit::process::{fio_verify as fio, have, Proc};

use cluster::{binary, qemu, random_writes_verified, start_volume, wait_quiet};

/// A chunk server's `/status` stats (`Null` if it does not answer).
fn server_stats(c: &LocalCluster, s: u32) -> serde_json::Value {
    c.status(Daemon::Server(s))
        .map_or(serde_json::Value::Null, |st| st["stats"].clone())
}

fn stat(v: &serde_json::Value, name: &str) -> u64 {
    v[name].as_u64().unwrap_or(0)
}

/// Server 0's chunk file is a slow device (nbdkit's delay filter) that stalls for 3 s (a
/// latency spike: the clients wait, nothing fails), then fails every I/O (nbdkit's error
/// filter). The server stops at its first error, saying which device; its groups' primaries move, the writes go on without
/// an error, it is declared failed for good and rebuilt, and every byte reads back — after a
/// second server of another rack goes too.
#[test]
fn a_chunk_server_whose_disk_stalls_then_fails_stops_naming_it_and_loses_nothing() {
    if !have("qemu-io") {
        return;
    }
    if !FaultyDevice::available() {
        cordillera_testkit::missing("/dev/fuse (nbdfuse needs FUSE)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dev_dir = dir.path().join("dev0");
    std::fs::create_dir_all(&dev_dir).unwrap();
    // Group g's 4 GiB of address space at g × 4 GiB, for the cluster's 96 groups (6 servers ×
    // 16); sparse, only written chunks take room.
    let device = FaultyDevice::start(
        &dev_dir,
        &dir.path().join("server0-disk.img"),
        96 << 32,
        // Every write 2 ms slower than the others' disks.
        &["error-rate=100%", "delay-write=2ms"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(dir.path().join("server0")).unwrap();
    std::os::unix::fs::symlink(device.path(), dir.path().join("server0/chunks.dat")).unwrap();
    let options = ClusterOptions {
        wake_seconds: 0.5,
        logger_size: "256m".into(),
        permanent_after_s: 3,
        ..ClusterOptions::default()
    };
    let mut c =
        LocalCluster::start(binary(), dir.path(), options).unwrap_or_else(|e| panic!("{e}"));
    let (_vol, url) = start_volume(&c, "disk", "64m");
    qemu(&url, &["write -P 0x41 0 64M"]).unwrap_or_else(|e| panic!("{e}"));
    let before = server_stats(&c, 0);
    assert!(
        stat(&before, "writes") + stat(&before, "replicated") > 0,
        "server 0 took none of the writes: {before} {:?}",
        c.exited()
    );

    // A latency spike: the disk stops for 3 s (three leases) under writes; they wait, or go
    // to the other replicas, and succeed.
    let t = Instant::now();
    let stalled = device.stall_for(Duration::from_secs(3));
    qemu(&url, &["write -P 0x43 0 16M", "read -P 0x43 0 16M"])
        .unwrap_or_else(|e| panic!("while server 0's disk stalls: {e}"));
    stalled.join().unwrap().unwrap();
    let spiked = t.elapsed();
    assert!(c.exited().is_empty(), "a daemon stopped: {:?}", c.exited());

    device.errors(true).unwrap();
    let t = Instant::now();
    // Written and read back while server 0's disk fails: its groups' other replicas serve.
    qemu(&url, &["write -P 0x42 0 64M", "read -P 0x42 0 64M"])
        .unwrap_or_else(|e| panic!("while server 0's disk fails: {e}"));
    let served = t.elapsed();
    let deadline = Instant::now() + Duration::from_secs(60);
    let log = loop {
        if let Some((_, log)) = c
            .exited()
            .into_iter()
            .find(|(d, _)| *d == Daemon::Server(0))
        {
            break log;
        }
        assert!(
            Instant::now() < deadline,
            "server 0 still running on a failed disk: {}",
            c.log(Daemon::Server(0))
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // The server's name for its device (here a link to the failing one).
    let device_name = dir.path().join("server0/chunks.dat").display().to_string();
    assert!(
        log.contains("Input/output error") && log.contains(&device_name),
        "the error names neither the failure nor the device ({device_name}): {log}"
    );
    c.kill(Daemon::Server(0));

    // Declared failed for good after 3 s of silence, its groups rebuilt elsewhere.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mds = loop {
        let mds = c.status(Daemon::Mds).unwrap();
        let stats = &mds["stats"];
        let started = stat(stats, "rebuilds_started");
        if stat(stats, "permanent_failures") >= 1
            && started > 0
            && stat(stats, "rebuilds_done") == started
        {
            break mds;
        }
        assert!(Instant::now() < deadline, "rebuild not done: {mds}");
        std::thread::sleep(Duration::from_millis(100));
    };
    println!(
        "server 0's disk stalled 3 s: 16 MiB written and read back in {:.1} s; then it failed: 64 MiB written and read back in {:.1} s meanwhile, the server stopped naming {device_name}; {} groups rebuilt",
        spiked.as_secs_f64(),
        served.as_secs_f64(),
        mds["stats"]["rebuilds_done"]
    );
    c.kill(Daemon::Server(3));
    qemu(&url, &["read -P 0x42 0 64M"]).unwrap_or_else(|e| panic!("after the rebuild: {e}"));
}

/// The MDS's address as a socket address.
fn mds_socket(c: &LocalCluster) -> std::net::SocketAddr {
    c.mds_addr().parse().unwrap()
}

/// Server `s` started again with its MDS link through `proxy` (its peers and clients reach it
/// directly, as before).
fn respawn_behind(c: &mut LocalCluster, s: u32, proxy: &LinkProxy) -> Proc {
    c.kill(Daemon::Server(s));
    let args: Vec<String> = [
        "cluster",
        "server",
        "--dir",
        &c.dir.join(format!("server{s}")).display().to_string(),
        "--mds",
        &proxy.addr().to_string(),
        "--id",
        &s.to_string(),
        "--wake-seconds",
        &c.options.wake_seconds.to_string(),
        "--http",
        &c.http_addr(Daemon::Server(s)).unwrap(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    Proc::spawn_until(
        binary(),
        &args,
        &["cordillera cluster server: listening on "],
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .0
}

/// Server 0's link to the MDS pauses for 6 s (leases last 1 s; the MDS suspects a server after
/// 3 s of silence) while fio writes and verifies: the server's leases lapse and it refuses to
/// write as primary, the MDS gives its groups to other replicas, the client follows them.
/// When the link passes again the server's late messages change nothing; every block verifies.
#[test]
fn a_chunk_server_cut_off_from_the_mds_past_its_lease_changes_nothing_and_loses_nothing() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster::start_cluster(dir.path());
    let proxy = LinkProxy::start(mds_socket(&c)).unwrap();
    let _server = respawn_behind(&mut c, 0, &proxy);
    let (_vol, url) = start_volume(&c, "stall", "64m");
    // Until server 0 is a primary again (the MDS balances primaries over the servers up).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mds = c.status(Daemon::Mds).unwrap();
        let primaries = mds["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == 0)
            .map_or(0, |s| s["primaries"].as_u64().unwrap_or(0));
        if primaries > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "server 0 holds no primary: {mds}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    fio(
        &url,
        &["--rw=write", "--bs=64k", "--size=64m", "--do_verify=1"],
    );
    let before = server_stats(&c, 0);
    let reassigned_before = stat(&c.status(Daemon::Mds).unwrap()["stats"], "reassignments");

    let stall = Duration::from_secs(6);
    let writer = {
        let url = url.clone();
        std::thread::spawn(move || random_writes_verified(&url, 14))
    };
    std::thread::sleep(Duration::from_secs(2));
    let resumed = proxy.pause_for(stall);
    resumed.join().unwrap();
    let text = writer.join().unwrap();
    assert!(text.contains("err= 0"), "{text}");
    let after = server_stats(&c, 0);
    let mds = wait_quiet(&c, Duration::from_secs(60));
    let reassigned = stat(&mds["stats"], "reassignments") - reassigned_before;
    let lapsed = stat(&after, "leases_lapsed") - stat(&before, "leases_lapsed");
    let refused = stat(&after, "refused_lease") + stat(&after, "refused_not_primary")
        - stat(&before, "refused_lease")
        - stat(&before, "refused_not_primary");
    let fenced: u64 = (1..c.servers())
        .map(|s| stat(&server_stats(&c, s), "replicas_fenced"))
        .sum();
    println!(
        "server 0's MDS link paused {} s under fio: {lapsed} of its leases lapsed, {reassigned} groups reassigned, {refused} client requests refused by it meanwhile, {fenced} stale replica writes fenced by its peers; fio verified every block",
        stall.as_secs()
    );
    assert!(lapsed > 0, "no lease lapsed: {after}");
    assert!(reassigned > 0, "no group moved: {mds}");
    // The writer above verified every block it wrote during the stall once its time was up;
    // with the link back, writes and their verification go on as before.
    random_writes_verified(&url, 2);
    qemu(&url, &["write -P 0x55 0 64M", "read -P 0x55 0 64M"])
        .unwrap_or_else(|e| panic!("after the stall: {e}"));
}

/// Logger 0 behind a proxy. The cluster is started once to write its spec, the spec's logger 0
/// pointed at the proxy, and the cluster started again from nothing with that spec (the logger
/// itself listens where it did).
fn cluster_with_logger_0_behind_a_proxy(dir: &std::path::Path) -> (LocalCluster, LinkProxy) {
    let options = ClusterOptions {
        wake_seconds: 0.5,
        logger_size: "256m".into(),
        ..ClusterOptions::default()
    };
    let mut c =
        LocalCluster::start(binary(), dir, options.clone()).unwrap_or_else(|e| panic!("{e}"));
    let logger = c.addr(Daemon::Logger(0));
    c.stop();
    drop(c);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() == "spec.json" {
            continue;
        }
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let proxy = LinkProxy::start(logger.parse().unwrap()).unwrap();
    let spec_path = dir.join("spec.json");
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
    spec["loggers"][0]["addr"] = proxy.addr().to_string().into();
    std::fs::write(&spec_path, serde_json::to_vec_pretty(&spec).unwrap()).unwrap();
    let c = LocalCluster::start(binary(), dir, options).unwrap_or_else(|e| panic!("{e}"));
    (c, proxy)
}

/// In gear 1 every write is logged, one copy per rack. Logger 0's link pauses for 6 s (six
/// leases) while writes go on: they wait, or are logged without it, never fail; when it passes
/// again and the gear goes up, the logged data is reclaimed and every byte reads back.
#[test]
fn a_logger_unreachable_past_a_lease_in_logging_mode_costs_latency_not_data() {
    if !have("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (c, proxy) = cluster_with_logger_0_behind_a_proxy(dir.path());
    let (_vol, url) = start_volume(&c, "logger", "32m");
    qemu(&url, &["write -P 0x61 0 32M"]).unwrap_or_else(|e| panic!("{e}"));
    c.gear("1").unwrap();
    cluster::wait_gear_1(&c);
    qemu(&url, &["write -P 0x62 0 8M"]).unwrap_or_else(|e| panic!("{e}"));
    let (_, bytes_before, _) = proxy.figures();
    assert!(
        bytes_before > 0,
        "nothing was logged through logger 0's link"
    );

    let stall = Duration::from_secs(6);
    let resumed = proxy.pause_for(stall);
    let t = Instant::now();
    qemu(
        &url,
        &[
            "write -P 0x63 8M 8M",
            "read -P 0x62 0 8M",
            "read -P 0x63 8M 8M",
        ],
    )
    .unwrap_or_else(|e| panic!("with logger 0's link paused: {e}"));
    let took = t.elapsed();
    resumed.join().unwrap();
    qemu(&url, &["write -P 0x64 16M 8M"]).unwrap_or_else(|e| panic!("{e}"));
    let logged: u64 = (0..c.servers())
        .map(|s| stat(&server_stats(&c, s), "logged_writes"))
        .sum();
    c.gear("3").unwrap();
    wait_quiet(&c, Duration::from_secs(60));
    let reclaimed: u64 = (0..c.servers())
        .map(|s| stat(&server_stats(&c, s), "reclaimed_bytes"))
        .sum();
    println!(
        "gear 1, logger 0's link paused {} s: 8 MiB written and 16 MiB read back in {:.1} s meanwhile; {logged} writes logged, {reclaimed} bytes reclaimed after the up-shift",
        stall.as_secs(),
        took.as_secs_f64()
    );
    assert!(
        logged > 0 && reclaimed > 0,
        "logged {logged}, reclaimed {reclaimed}"
    );
    qemu(
        &url,
        &[
            "read -P 0x62 0 8M",
            "read -P 0x63 8M 8M",
            "read -P 0x64 16M 8M",
            "read -P 0x61 24M 8M",
        ],
    )
    .unwrap_or_else(|e| panic!("after the up-shift: {e}"));
}
