//! The storage pool on real processes: `cordillera pool serve` over array files, volumes placed
//! wide and narrow and exported over NBD; fio verifies every block while an added array is
//! restriped online; the pool is SIGKILLed mid-restripe, restarted, every acknowledged block
//! read back and the restripe completes; bad input gets clear errors and changes nothing.

mod pool;

use std::process::Command;
use std::time::{Duration, Instant};

use cordillera_striping::layout::PoolLayout;
use cordillera_testkit::process::{fio_verify as fio, have, Bounded, COMMAND_LIMIT};
use pool::{binary, member_pool, Pool};

fn restripe_fraction(p: &Pool, name: &str) -> Option<f64> {
    p.volume(name)["restripe"]["fraction_done"].as_f64()
}

#[test]
fn fio_verifies_wide_and_narrow_volumes_while_an_added_array_is_restriped() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Arrays paced by models of RAID-5 4+p Fujitsu MAJ3182MC disks; 16 MB/s: the 96 MiB wide
    // volume takes several seconds to restripe, under fio's load.
    let pool = Pool::start(
        dir.path(),
        2,
        &[
            "--restripe-rate",
            "16m",
            "--batch",
            "1m",
            "--emulate",
            "fujitsu-maj3182mc",
        ],
    )
    .unwrap();
    pool.ok(&[
        "create-volume",
        "wide",
        "--size",
        "96m",
        "--policy",
        "wide",
        "--mean-request-bytes",
        "64k",
    ]);
    pool.ok(&[
        "create-volume",
        "narrow",
        "--size",
        "48m",
        "--policy",
        "narrow",
        "--mean-request-bytes",
        "1m",
    ]);
    let narrow_before = pool.volume("narrow");
    assert_eq!(narrow_before["arrays"].as_array().unwrap().len(), 1);
    assert_eq!(pool.volume("wide")["stripe_unit_bytes"], 32 << 10);
    assert_eq!(narrow_before["stripe_unit_bytes"], 512 << 10);
    // Both volumes written and verified while the restripe runs: random 64 KiB on the wide
    // one, sequential 1 MiB on the narrow one.
    let (wide_url, narrow_url) = (pool.url("wide"), pool.url("narrow"));
    let wide_fio = std::thread::spawn(move || {
        fio(
            &wide_url,
            &["--rw=randwrite", "--bs=64k", "--size=96m", "--loops=2"],
        )
    });
    let narrow_fio = std::thread::spawn(move || {
        fio(
            &narrow_url,
            &["--rw=write", "--bs=1m", "--size=48m", "--loops=3"],
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    let added = pool.ok(&["add-array", &dir.path().join("a2").display().to_string()]);
    assert!(added.contains("restriping wide volume wide"), "{added}");
    assert!(
        !added.contains("narrow onto"),
        "narrow volumes stay: {added}"
    );
    // Progress is visible while it runs: (fraction copied, whether fio on the wide volume
    // was still running).
    let mut seen = Vec::new();
    while let Some(f) = restripe_fraction(&pool, "wide") {
        seen.push((f, !wide_fio.is_finished()));
        std::thread::sleep(Duration::from_millis(500));
    }
    let wide_out = wide_fio.join().unwrap();
    let narrow_out = narrow_fio.join().unwrap();
    let s = pool.wait_restriped(Duration::from_secs(120));
    println!(
        "restripe progress seen (fraction, fio running): {seen:?}; {} writes waited for a batch; fio wide: {}; fio narrow: {}",
        s["parked_writes"],
        wide_out.lines().find(|l| l.contains("WRITE:")).unwrap_or(""),
        narrow_out.lines().find(|l| l.contains("WRITE:")).unwrap_or("")
    );
    assert!(
        seen.iter().any(|&(f, running)| f > 0.2 && running),
        "the restripe overlapped the load: {seen:?}"
    );
    let wide = pool.volume("wide");
    assert_eq!(wide["arrays"], serde_json::json!([0, 1, 2]));
    assert_eq!(pool.volume("narrow")["extents"], narrow_before["extents"]);
    assert_eq!(s["errors"], 0);
    assert!(s["restripe_bytes"].as_u64().unwrap() >= 96 << 20);
    // Everything verifies once more after the restripe, from the new layout.
    fio(
        &pool.url("wide"),
        &["--rw=randwrite", "--bs=64k", "--size=96m", "--verify_only"],
    );
    fio(
        &pool.url("narrow"),
        &["--rw=write", "--bs=1m", "--size=48m", "--verify_only"],
    );
    let metrics = cordillera_testkit::cluster::http_get(&pool.http, "/metrics").unwrap();
    let copied = metrics
        .lines()
        .find_map(|l| l.strip_prefix("cordillera_pool_restripe_bytes_total "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no restripe bytes in /metrics:\n{metrics}"));
    assert!(copied >= 96 << 20, "{copied}");
}

#[test]
fn a_sigkill_mid_restripe_loses_nothing_and_the_restripe_completes() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut pool =
        Pool::start(dir.path(), 2, &["--restripe-rate", "12m", "--batch", "1m"]).unwrap();
    pool.ok(&["create-volume", "w", "--size", "64m", "--policy", "wide"]);
    let url = pool.url("w");
    // Two interleaved passes of 256 KiB blocks, each verifiable on its own (fio's headers name
    // the pass): the even blocks written before the array is added, the odd ones while the
    // restripe runs (both behind and ahead of its cursor). Each pass writes each of its 128
    // blocks once (`--io_size`): without it fio wraps around its region and writes every even
    // block twice, and at depth 8 both writes of a block can be in flight at once — the volume
    // may then keep one's units on one array and the other's on the other (as any striped
    // device may for overlapping writes in flight together), which the verify took for a loss.
    let even = [
        "--rw=write:256k",
        "--bs=256k",
        "--size=64m",
        "--io_size=32m",
    ];
    let odd = [
        "--rw=write:256k",
        "--bs=256k",
        "--offset=256k",
        "--size=66846720",
        "--io_size=32m",
    ];
    let with = |pass: &[&str], more: &[&str]| -> Vec<String> {
        pass.iter().chain(more).map(|s| s.to_string()).collect()
    };
    let run = |url: &str, args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        fio(url, &refs)
    };
    let once = |text: String| {
        assert!(
            text.contains("issued rwts: total=0,128,0,0"),
            "a pass writes each of its blocks once:\n{text}"
        );
    };
    once(run(&url, with(&even, &["--do_verify=0"])));
    pool.ok(&["add-array", &dir.path().join("a2").display().to_string()]);
    once(run(&url, with(&odd, &["--do_verify=0"])));
    let deadline = Instant::now() + Duration::from_secs(60);
    let at = loop {
        let f = restripe_fraction(&pool, "w").expect("restriping");
        if f >= 0.3 {
            break f;
        }
        assert!(
            Instant::now() < deadline,
            "the restripe did not progress: {f}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    pool.proc.kill();
    let layout = PoolLayout::decode(&std::fs::read(dir.path().join("meta/pool.layout")).unwrap())
        .unwrap()
        .0;
    let cursor = layout.volumes[0]
        .restripe
        .as_ref()
        .expect("a restripe in the record")
        .cursor;
    println!(
        "killed at {:.0} % copied; durable cursor {} MiB of 64",
        at * 100.0,
        cursor >> 20
    );
    assert!(cursor > 0 && cursor < 64 << 20);
    // Restarted from the record alone: the restripe resumes where its cursor was durable, and
    // every acknowledged block reads back meanwhile and after.
    let pool = Pool::start(dir.path(), 0, &["--restripe-rate", "12m", "--batch", "1m"]).unwrap();
    let url = pool.url("w");
    let f = restripe_fraction(&pool, "w").expect("the restripe resumed");
    assert!(f >= cursor as f64 / (64 << 20) as f64 - 1e-9, "{f}");
    run(&url, with(&even, &["--verify_only"]));
    run(&url, with(&odd, &["--verify_only"]));
    let s = pool.wait_restriped(Duration::from_secs(120));
    assert_eq!(s["errors"], 0);
    assert_eq!(pool.volume("w")["arrays"], serde_json::json!([0, 1, 2]));
    run(&url, with(&even, &["--verify_only"]));
    run(&url, with(&odd, &["--verify_only"]));
    // And a full write-and-verify pass on the restriped volume.
    fio(&url, &["--rw=randrw", "--bs=32k", "--size=64m"]);
    drop(pool);
}

/// A command that must fail; its output.
fn fails(args: &[&str]) -> String {
    let out = Command::new(binary())
        .args(args)
        .output_within(COMMAND_LIMIT)
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{args:?} succeeded:\n{text}");
    assert!(!text.contains("panicked"), "{text}");
    text
}

#[test]
fn bad_input_gets_clear_errors_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::start(dir.path(), 2, &[]).unwrap();
    pool.ok(&["create-volume", "v", "--size", "64m", "--policy", "wide"]);
    let before = std::fs::read(dir.path().join("meta/pool.layout")).unwrap();
    // A volume larger than the free space, a duplicate name, bad sizes and policies.
    let (ok, text) = pool.cli(&["create-volume", "huge", "--size", "2g", "--policy", "wide"]);
    assert!(!ok && text.contains("no free range"), "{text}");
    let (ok, text) = pool.cli(&["create-volume", "v", "--size", "1m"]);
    assert!(!ok && text.contains("exists"), "{text}");
    let (ok, text) = pool.cli(&["create-volume", "odd", "--size", "1000"]);
    assert!(!ok && text.contains("multiple of 512"), "{text}");
    let (ok, text) = pool.cli(&["create-volume", "p", "--size", "1m", "--policy", "sideways"]);
    assert!(!ok && text.contains("wide, narrow or auto"), "{text}");
    let (ok, text) = pool.cli(&[
        "create-volume",
        "w",
        "--size",
        "1m",
        "--write-fraction",
        "2",
    ]);
    assert!(!ok && text.contains("0 to 1"), "{text}");
    // An array already in the pool.
    let (ok, text) = pool.cli(&["add-array", &dir.path().join("a0").display().to_string()]);
    assert!(!ok && text.contains("already an array"), "{text}");
    let after = std::fs::read(dir.path().join("meta/pool.layout")).unwrap();
    assert_eq!(before, after, "refused requests change nothing");
    // NBD: an unknown export is refused by name.
    if have("nbdinfo") {
        let out = Command::new("nbdinfo")
            .arg(format!("nbd://{}/nosuch", pool.nbd))
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(!out.status.success());
    }
    // WRITE_ZEROES over the whole volume (one request may ask for gigabytes: carried out in
    // pieces), then data again.
    if have("qemu-io") {
        let out = Command::new("qemu-io")
            .args([
                "-f",
                "raw",
                "-c",
                "write -P 0x5a 0 64M",
                "-c",
                "write -z 0 64M",
            ])
            .args([
                "-c",
                "read -P 0 0 64M",
                "-c",
                "write -P 0x11 1M 1M",
                "-c",
                "read -P 0x11 1M 1M",
            ])
            .arg(pool.url("v"))
            .output_within(COMMAND_LIMIT)
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !text.contains("failed"), "{text}");
    }
    let http = pool.http.clone();
    drop(pool);
    // The server is gone: a clear error naming the address.
    let text = fails(&["pool", "status", "--server", &http]);
    assert!(text.contains(&http), "{text}");
    // A corrupt layout record: refused naming the file, and left as it was.
    let record = dir.path().join("meta/pool.layout");
    let mut bytes = std::fs::read(&record).unwrap();
    let good = bytes.clone();
    let last = bytes.len() - 5;
    bytes[last] ^= 0x20;
    std::fs::write(&record, &bytes).unwrap();
    let e = Pool::start(dir.path(), 0, &[]).err().expect("refused");
    assert!(e.contains("pool.layout") && e.contains("checksum"), "{e}");
    assert_eq!(std::fs::read(&record).unwrap(), bytes);
    // Overlapping volumes in an intact record: refused by the pool's checks.
    let (mut layout, _) = PoolLayout::decode(&good).unwrap();
    let mut twin = layout.volumes[0].clone();
    twin.name = "twin".into();
    layout.volumes.push(twin);
    std::fs::write(&record, layout.encode()).unwrap();
    let e = Pool::start(dir.path(), 0, &[]).err().expect("refused");
    assert!(e.contains("overlap"), "{e}");
    // A missing array file.
    std::fs::write(&record, &good).unwrap();
    std::fs::rename(dir.path().join("a1"), dir.path().join("a1.moved")).unwrap();
    let e = Pool::start(dir.path(), 0, &[]).err().expect("refused");
    assert!(e.contains("a1") && e.contains("No such file"), "{e}");
    std::fs::rename(dir.path().join("a1.moved"), dir.path().join("a1")).unwrap();
    // Arrays given for a folder that holds another pool; and no arrays for an empty folder.
    let e = Pool::start(dir.path(), 3, &[]).err().expect("refused");
    assert!(e.contains("already describes a pool"), "{e}");
    let empty = tempfile::tempdir().unwrap();
    let e = Pool::start(empty.path(), 0, &[]).err().expect("refused");
    assert!(e.contains("holds no pool"), "{e}");
    // Intact again: it serves, with its volume.
    let pool = Pool::start(dir.path(), 0, &[]).unwrap();
    assert_eq!(pool.volume("v")["size_bytes"], 64 << 20);
}

/// Arrays given as member files, on which the pool runs RAID-5 itself: fio verifies random
/// writes that cut across stripe units (read-modify-write of parity) while an added member
/// array is restriped, and after a clean stop every row's parity is the XOR of its data.
#[test]
fn member_arrays_serve_verified_io_and_keep_parity_through_a_restripe() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut pool, members) = member_pool(dir.path(), &["--batch", "1m", "--restripe-rate", "8m"]);
    pool.ok(&["create-volume", "w", "--size", "48m", "--policy", "wide"]);
    pool.ok(&["create-volume", "n", "--size", "16m", "--policy", "narrow"]);
    let (w, n) = (pool.url("w"), pool.url("n"));
    let wide = std::thread::spawn(move || {
        fio(
            &w,
            &["--rw=randwrite", "--bs=12k", "--size=48m", "--loops=2"],
        )
    });
    fio(&n, &["--rw=randrw", "--bs=20k", "--size=16m"]);
    pool.ok(&["add-array", &members(2)]);
    wide.join().unwrap();
    let s = pool.wait_restriped(Duration::from_secs(120));
    assert_eq!(s["errors"], 0);
    assert_eq!(pool.volume("w")["arrays"], serde_json::json!([0, 1, 2]));
    fio(
        &pool.url("w"),
        &[
            "--rw=randwrite",
            "--bs=12k",
            "--size=48m",
            "--verify_only",
            "--loops=2",
        ],
    );
    for a in ["0", "1", "2"] {
        let out = pool.ok(&["scrub", "--array", a]);
        assert!(out.contains(" 0 inconsistent"), "{out}");
    }
    assert_eq!(pool.proc.terminate(Duration::from_secs(10)), Ok(true));
    let unit = 64 << 10;
    // Each member: its labels and journal, then its data.
    let data = cordillera_runtime::pool_server::member_area(unit as u64).data_offset() as usize;
    for a in 0..3 {
        let disks: Vec<Vec<u8>> = (0..5)
            .map(|d| std::fs::read(dir.path().join(format!("a{a}d{d}"))).unwrap()[data..].to_vec())
            .collect();
        let mut written = 0;
        for row in 0..disks[0].len() / unit {
            let range = row * unit..(row + 1) * unit;
            let mut x = vec![0u8; unit];
            for d in &disks {
                for (a, b) in x.iter_mut().zip(&d[range.clone()]) {
                    *a ^= b;
                }
            }
            assert!(
                x.iter().all(|b| *b == 0),
                "array {a}, row {row}: parity is not the XOR of its data"
            );
            written += usize::from(
                disks
                    .iter()
                    .any(|d| d[range.clone()].iter().any(|b| *b != 0)),
            );
        }
        assert!(written > 10, "array {a}: {written} rows hold data");
    }
}

/// An array added while writes are in flight: the restripe that begins must wait for them
/// before copying, or a batch copied before such a write lands keeps the old bytes on the new
/// layout (`Restripe::in_flight_before`; the restripe simulation's regression seeds). Member
/// arrays on paced disks keep each write in flight for milliseconds (its parity's
/// read-modify-write), and the first batches are small, so the array is added in the middle
/// of many writes to them; fio verifies every block before and after the restripe.
#[test]
fn writes_in_flight_when_an_array_is_added_are_not_lost() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (pool, members) = member_pool(
        dir.path(),
        &[
            "--emulate",
            "fujitsu-maj3182mc",
            "--batch",
            "256k",
            "--restripe-rate",
            "0",
        ],
    );
    pool.ok(&["create-volume", "w", "--size", "8m", "--policy", "wide"]);
    let url = pool.url("w");
    let writer = {
        let url = url.clone();
        std::thread::spawn(move || {
            fio(
                &url,
                &[
                    "--rw=randwrite",
                    "--bs=12k",
                    "--size=2m",
                    "--iodepth=32",
                    "--loops=3",
                ],
            )
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    pool.ok(&["add-array", &members(2)]);
    writer.join().unwrap();
    let s = pool.wait_restriped(Duration::from_secs(120));
    assert_eq!(s["errors"], 0);
    assert_eq!(pool.volume("w")["arrays"], serde_json::json!([0, 1, 2]));
    fio(
        &url,
        &[
            "--rw=randwrite",
            "--bs=12k",
            "--size=2m",
            "--verify_only",
            "--loops=3",
        ],
    );
}

/// `pool serve --control-token FILE`: a client without the token cannot create a volume (401,
/// nothing changes), one with a wrong token neither (403); with the right one it can; reading
/// `/status` from the machine itself needs none.
#[test]
fn with_a_control_token_the_control_plane_refuses_clients_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    let wrong = dir.path().join("wrong");
    std::fs::write(&token, "7d1c0e5f2a9b48e3b6c4d2f1a0e9b8c7\n").unwrap();
    std::fs::write(&wrong, "00000000000000000000000000000000\n").unwrap();
    let token_arg = token.display().to_string();
    let pool = Pool::start(dir.path(), 1, &["--control-token", &token_arg]).unwrap();
    let create = |env: Option<&std::path::Path>| {
        let mut cmd = Command::new(binary());
        cmd.args([
            "pool",
            "create-volume",
            "v",
            "--size",
            "16m",
            "--server",
            &pool.http,
        ]);
        if let Some(file) = env {
            cmd.env("CORDILLERA_CONTROL_TOKEN_FILE", file);
        }
        let out = cmd.output_within(COMMAND_LIMIT).unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), text)
    };
    let (ok, text) = create(None);
    assert!(!ok && text.contains("401"), "{text}");
    let (ok, text) = create(Some(&wrong));
    assert!(!ok && text.contains("403"), "{text}");
    let status = pool.status();
    assert!(status["volumes"].as_array().unwrap().is_empty(), "{status}");
    let (ok, text) = create(Some(&token));
    assert!(ok, "{text}");
    assert_eq!(pool.volume("v")["name"], "v");
    drop(pool);
    // Beyond loopback without a token the control plane is refused before anything opens.
    let meta = dir.path().join("other").display().to_string();
    let text = fails(&["pool", "serve", "--dir", &meta, "--http", "0.0.0.0:0"]);
    assert!(
        text.contains("refusing to listen on 0.0.0.0:0 for HTTP"),
        "{text}"
    );
    assert!(!dir.path().join("other").exists(), "nothing created");
}
