//! Member arrays that lose a member, on real processes: a RAID-5 4+p array of member files
//! serves a wide volume that fio writes and verifies (crc32c) through a missing member, a
//! member swapped for a blank disk, a member replaced and rebuilt online, a SIGKILL mid-rebuild
//! (the rebuild resumes), and an unclean stop mid-write (the dirty rows are resynchronised and a
//! scrub finds every row consistent). With nbdkit's error filter under one member (an nbdfuse
//! file), the member returns EIO mid-run: it is failed, fio sees no error, and it is replaced.

mod pool;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cordillera_faults::FaultyDevice;
use cordillera_testkit::process::{fio_verify as fio, have, Bounded, Proc};
use pool::{binary, Pool};

/// The member files of the array: `dir/m0` … `dir/m4`.
fn members(dir: &Path) -> Vec<PathBuf> {
    (0..5).map(|d| dir.join(format!("m{d}"))).collect()
}

/// `pool serve` in `dir`: a new pool over `array` (comma-separated members), or the pool in
/// `dir` when `array` is `None`.
fn serve(dir: &Path, array: Option<&str>, extra: &[&str]) -> Result<Pool, String> {
    let (nbd, http) = pool::two_free_addrs();
    let mut args: Vec<String> = vec![
        "pool".into(),
        "serve".into(),
        "--dir".into(),
        dir.join("meta").display().to_string(),
        "--nbd".into(),
        nbd.to_string(),
        "--http".into(),
        http.to_string(),
        "--disk-size".into(),
        "16m".into(),
        "--unit".into(),
        "64k".into(),
    ];
    if let Some(a) = array {
        args.push("--array".into());
        args.push(a.into());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let (proc, _) = Proc::spawn_until(binary(), &args, &["cordillera pool: 1 array(s)"])?;
    Ok(Pool {
        proc,
        nbd: nbd.to_string(),
        http: http.to_string(),
    })
}

fn joined(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn member_states(p: &Pool) -> Vec<String> {
    p.status()["arrays"][0]["members"]["members"]
        .as_array()
        .expect("a member array")
        .iter()
        .map(|m| m["state"].as_str().unwrap().to_string())
        .collect()
}

/// fio writes the whole volume (random order, 12 KiB: rows' parity read, changed, written).
fn write_all(p: &Pool, seed: &str) {
    fio(
        &p.url("v"),
        &[
            "--rw=randwrite",
            "--bs=12k",
            "--size=32m",
            &format!("--randseed={seed}"),
        ],
    );
}

/// fio reads the whole volume back and checks every block it wrote last.
fn verify_all(p: &Pool, seed: &str) {
    fio(
        &p.url("v"),
        &[
            "--rw=randwrite",
            "--bs=12k",
            "--size=32m",
            &format!("--randseed={seed}"),
            "--verify_only",
        ],
    );
}

fn wait_in_sync(p: &Pool, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let states = member_states(p);
        if states.iter().all(|s| s == "in-sync") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not rebuilt after {limit:?}: {states:?}\n{}",
            p.proc.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn scrub_clean(p: &Pool) {
    let out = p.ok(&["scrub", "--array", "0"]);
    assert!(out.contains(" 0 inconsistent"), "{out}");
}

#[test]
fn a_member_array_survives_lost_and_blank_members_and_rebuilds_online() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path());
    let mut pool = serve(dir.path(), Some(&joined(&m)), &["--restripe-rate", "0"]).unwrap();
    pool.ok(&["create-volume", "v", "--size", "32m", "--policy", "wide"]);
    write_all(&pool, "1");
    assert_eq!(pool.proc.terminate(Duration::from_secs(10)), Ok(true));

    // A member file gone: the pool starts degraded, says which member and why, and serves
    // every block; writes go on.
    std::fs::remove_file(&m[2]).unwrap();
    let mut pool = serve(dir.path(), None, &[]).unwrap();
    assert!(pool.proc.log().contains("member 2"), "{}", pool.proc.log());
    assert_eq!(member_states(&pool)[2], "failed");
    assert!(pool.ok(&["status"]).contains("DEGRADED"));
    verify_all(&pool, "1");
    write_all(&pool, "2");
    verify_all(&pool, "2");

    // Replaced by a new file and rebuilt online while fio verifies.
    let fresh = dir.path().join("m2-new");
    let p2 = pool.url("v");
    let reader = std::thread::spawn(move || {
        fio(
            &p2,
            &[
                "--rw=randwrite",
                "--bs=12k",
                "--size=32m",
                "--randseed=2",
                "--verify_only",
            ],
        )
    });
    let out = pool.ok(&[
        "replace-member",
        "--array",
        "0",
        "--member",
        "2",
        fresh.to_str().unwrap(),
    ]);
    assert!(out.contains("rebuilt"), "{out}");
    reader.join().unwrap();
    assert_eq!(member_states(&pool), vec!["in-sync"; 5]);
    verify_all(&pool, "2");
    scrub_clean(&pool);
    assert_eq!(pool.proc.terminate(Duration::from_secs(10)), Ok(true));

    // A member overwritten with zeros (a blank disk put in its slot): failed as blank, never
    // served as data.
    let len = std::fs::metadata(&m[4]).unwrap().len();
    std::fs::write(&m[4], vec![0u8; len as usize]).unwrap();
    let mut pool = serve(dir.path(), None, &[]).unwrap();
    assert!(
        pool.proc.log().contains("member 4: blank"),
        "{}",
        pool.proc.log()
    );
    verify_all(&pool, "2");

    // Its replacement rebuilt slowly; SIGKILL mid-rebuild; the restart resumes it.
    pool.proc.kill();
    let mut pool = serve(dir.path(), None, &["--restripe-rate", "4m"]).unwrap();
    let fresh = dir.path().join("m4-new");
    pool.ok(&[
        "replace-member",
        "--array",
        "0",
        "--member",
        "4",
        "--no-wait",
        fresh.to_str().unwrap(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mid = loop {
        let s = pool.status();
        let done = s["arrays"][0]["members"]["members"][4]["rebuilt_rows"]
            .as_u64()
            .unwrap_or(0);
        if done > 16 {
            break done;
        }
        assert!(Instant::now() < deadline, "the rebuild did not start: {s}");
        std::thread::sleep(Duration::from_millis(50));
    };
    pool.proc.kill();
    let pool = serve(dir.path(), None, &["--restripe-rate", "0"]).unwrap();
    let resumed = pool.status()["arrays"][0]["members"]["members"][4]["rebuilt_rows"].as_u64();
    assert!(
        resumed.is_none_or(|r| r >= 16),
        "the rebuild restarted from {resumed:?} after reaching {mid} rows"
    );
    wait_in_sync(&pool, Duration::from_secs(60));
    verify_all(&pool, "2");
    scrub_clean(&pool);

    // An unclean stop in the middle of writes: the dirty rows are resynchronised at start and
    // a scrub finds every row consistent.
    let url = pool.url("v");
    let writer = std::thread::spawn(move || {
        Command::new("fio")
            .args([
                "--name=w",
                "--ioengine=nbd",
                &format!("--uri={url}"),
                "--rw=randwrite",
                "--bs=12k",
                "--size=32m",
                "--iodepth=16",
                "--time_based",
                "--runtime=20",
            ])
            .output_within(Duration::from_secs(60))
    });
    std::thread::sleep(Duration::from_millis(1500));
    let mut pool = pool;
    pool.proc.kill();
    let _ = writer.join();
    let pool = serve(dir.path(), None, &[]).unwrap();
    assert!(
        pool.proc.log().contains("dirty rows resynchronised"),
        "{}",
        pool.proc.log()
    );
    scrub_clean(&pool);
}

/// A member under nbdkit's error filter (an nbdfuse file): once its error file exists, every
/// I/O to it returns EIO. Mid-run the member is failed with a log line naming its device, fio
/// verifies every block with no error, and the member is replaced and rebuilt.
#[test]
fn a_member_returning_eio_is_failed_without_an_error_reaching_the_client() {
    for tool in ["fio", "nbdkit", "nbdfuse"] {
        if !have(tool) {
            return;
        }
    }
    if !FaultyDevice::available() {
        cordillera_testkit::missing("/dev/fuse (nbdfuse needs FUSE)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut m = members(dir.path());
    // Member 3 is an nbdfuse file over nbdkit's file plugin, through the error filter.
    let area = cordillera_runtime::pool_server::member_area(64 << 10).data_offset();
    let dev = FaultyDevice::start(
        dir.path(),
        &dir.path().join("m3-backing"),
        area + (16 << 20),
        &["error-rate=100%"],
    )
    .unwrap();
    m[3] = dev.path();
    let pool = serve(dir.path(), Some(&joined(&m)), &["--restripe-rate", "0"]).unwrap();
    pool.ok(&["create-volume", "v", "--size", "32m", "--policy", "wide"]);
    write_all(&pool, "1");
    let url = pool.url("v");
    let writer = std::thread::spawn(move || {
        fio(
            &url,
            &[
                "--rw=randwrite",
                "--bs=12k",
                "--size=32m",
                "--randseed=3",
                "--loops=2",
            ],
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    dev.errors(true).unwrap();
    writer.join().unwrap();
    verify_all(&pool, "3");
    let log = pool.proc.log();
    assert!(
        log.contains("member 3") && log.contains("fuse/nbd"),
        "{log}"
    );
    assert_eq!(member_states(&pool)[3], "failed");
    assert!(
        pool.status()["arrays"][0]["members"]["device_errors"]
            .as_u64()
            .unwrap()
            > 0
    );
    let fresh = dir.path().join("m3-new");
    let out = pool.ok(&[
        "replace-member",
        "--array",
        "0",
        "--member",
        "3",
        fresh.to_str().unwrap(),
    ]);
    assert!(out.contains("rebuilt"), "{out}");
    verify_all(&pool, "3");
    scrub_clean(&pool);
}
