//! Keys on the ports the other tests leave open, as real processes: `cluster up --cluster-key`
//! runs every link of its cluster inside TLS, so `cluster gear` and `volume serve --cluster`
//! without the key reach nothing and with it work; the NBD ports of a cluster volume and of a
//! pool with `--tls require` refuse a client with another key and serve the one with it.
//! Needs qemu-io and nbdinfo (SKIPPED without them outside CI).

mod pool;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use cordillera_testkit::process::{free_addr, have, Bounded, Proc, COMMAND_LIMIT};

const BIN: &str = env!("CARGO_BIN_EXE_cordillera");
const CLUSTER_KEY: &str = "5a1f0e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a697887a5b4c3d2e1f0";
const NBD_KEY: &str = "8cd2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";
const WRONG_KEY: &str = "00d2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output_within(COMMAND_LIMIT)
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A folder holding `keys.psk` with `alice`'s key (qemu reads that name from a folder).
fn nbd_keys(dir: &Path, name: &str, hex: &str) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("keys.psk"), format!("alice:{hex}\n")).unwrap();
    folder
}

/// qemu-io over TLS with the PSK in `keys` (a folder).
fn qemu_tls(addr: &str, export: &str, keys: &Path, commands: &[&str]) -> Output {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let object = format!(
        "tls-creds-psk,id=tls0,endpoint=client,dir={},username=alice",
        keys.display()
    );
    let image = format!("driver=nbd,host={host},port={port},export={export},tls-creds=tls0");
    let mut cmd = Command::new("qemu-io");
    cmd.args(["--object", &object, "--image-opts", &image]);
    for c in commands {
        cmd.args(["-c", c]);
    }
    cmd.output_within(COMMAND_LIMIT).unwrap()
}

/// `nbdinfo` on an `nbds://` URL with the PSK in `keys` (a folder).
fn nbdinfo_tls(addr: &str, export: &str, keys: &Path) -> Output {
    let url = format!(
        "nbds://alice@{addr}/{export}?tls-psk-file={}",
        keys.join("keys.psk").display()
    );
    Command::new("nbdinfo")
        .arg(url)
        .output_within(COMMAND_LIMIT)
        .unwrap()
}

/// The client with the right key writes and reads back a pattern; one with another key is
/// refused and reads nothing.
fn the_key_holder_alone_is_served(addr: &str, export: &str, good: &Path, wrong: &Path) {
    let out = qemu_tls(
        addr,
        export,
        good,
        &[
            "write -P 0x5a 1048576 65536",
            "flush",
            "read -P 0x5a 1048576 65536",
        ],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(!t.contains("Pattern verification failed"), "{t}");
    assert!(t.contains("read 65536/65536"), "{t}");
    let out = qemu_tls(addr, export, wrong, &["read 0 4096"]);
    let t = text(&out);
    assert!(!out.status.success() || t.contains("Could not open"), "{t}");
    assert!(!t.contains("read 4096/4096"), "{t}");
    let out = nbdinfo_tls(addr, export, wrong);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("TLS"), "{}", text(&out));
    let out = nbdinfo_tls(addr, export, good);
    assert!(out.status.success(), "{}", text(&out));
}

/// A base port with the cluster's ports (`base` … `base + 9`, their HTTP endpoints from
/// `base + 100`) free a moment ago.
fn free_base_port() -> u16 {
    let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
    for _ in 0..200 {
        let base = free_addr().unwrap().port();
        if !(1024..=65_000).contains(&base) {
            continue;
        }
        if (base..base + 10).chain(base + 100..base + 110).all(free) {
            return base;
        }
    }
    panic!("no free range of ports found");
}

/// `cluster up`, stopped with SIGTERM (it then stops its daemons) when dropped.
struct Up(Proc);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.terminate(Duration::from_secs(60));
    }
}

#[test]
fn cluster_up_with_a_key_keeps_everyone_without_it_out() {
    if !have("qemu-io") || !have("nbdinfo") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("cluster.psk");
    std::fs::write(&keys, format!("cluster:{CLUSTER_KEY}\n")).unwrap();
    let keys_arg = keys.to_str().unwrap();
    // A keys file that is not one is refused before anything starts.
    let bad = dir.path().join("bad.psk");
    std::fs::write(&bad, "cluster:not-hex\n").unwrap();
    let cluster_dir = dir.path().join("c");
    let out = run(&[
        "cluster",
        "up",
        "--dir",
        cluster_dir.to_str().unwrap(),
        "--cluster-key",
        bad.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        !cluster_dir.exists(),
        "started with a bad key: {}",
        text(&out)
    );

    let base = free_base_port();
    let mds = format!("127.0.0.1:{base}");
    let args = strings(&[
        "cluster",
        "up",
        "--dir",
        cluster_dir.to_str().unwrap(),
        "--racks",
        "3",
        "--per-rack",
        "1",
        "--base-port",
        &base.to_string(),
        "--logger-size",
        "64m",
        "--wake-seconds",
        "0.3",
        "--cluster-key",
        keys_arg,
    ]);
    let (up, _) = Proc::spawn_until_within(
        Path::new(BIN),
        &args,
        &["cordillera cluster: up"],
        Duration::from_secs(120),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let _up = Up(up);

    // Without the key the MDS hears nothing, and says why that may be.
    let out = run(&["cluster", "gear", "1", "--mds", &mds]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("hears no one without it"),
        "{}",
        text(&out)
    );
    // Another key is no better.
    let wrong = dir.path().join("wrong.psk");
    std::fs::write(&wrong, format!("cluster:{WRONG_KEY}\n")).unwrap();
    let out = run(&[
        "cluster",
        "gear",
        "1",
        "--mds",
        &mds,
        "--cluster-key",
        wrong.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    // With it, the gear shifts (and back to the top).
    for gear in ["1", "3"] {
        let out = run(&[
            "cluster",
            "gear",
            gear,
            "--mds",
            &mds,
            "--cluster-key",
            keys_arg,
        ]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let status = run(&["cluster", "status", "--dir", cluster_dir.to_str().unwrap()]);
    assert!(status.status.success(), "{}", text(&status));

    // A volume without the cluster key finds no MDS.
    let nbd = free_addr().unwrap().to_string();
    let volume = [
        "volume",
        "serve",
        "--cluster",
        &mds,
        "--object",
        "v",
        "--size",
        "32m",
        "--nbd",
        &nbd,
    ];
    let out = run(&volume);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("unreachable"), "{}", text(&out));

    // With it, the volume serves; its own NBD port takes only the NBD key's holders.
    let good = nbd_keys(dir.path(), "good", NBD_KEY);
    let other = nbd_keys(dir.path(), "wrong", WRONG_KEY);
    let psk = good.join("keys.psk");
    let mut volume_args = strings(&volume);
    volume_args.extend(strings(&[
        "--export-name",
        "v",
        "--cluster-key",
        keys_arg,
        "--tls",
        "require",
        "--tls-psk",
        psk.to_str().unwrap(),
    ]));
    let (_volume, _) = Proc::spawn_until(
        Path::new(BIN),
        &volume_args,
        &["cordillera volume: NBD export at "],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    the_key_holder_alone_is_served(&nbd, "v", &good, &other);
}

#[test]
fn a_pools_nbd_port_serves_the_key_holder_alone() {
    if !have("qemu-io") || !have("nbdinfo") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let good = nbd_keys(dir.path(), "good", NBD_KEY);
    let other = nbd_keys(dir.path(), "wrong", WRONG_KEY);
    let psk = good.join("keys.psk");
    let pool = pool::Pool::start(
        dir.path(),
        1,
        &["--tls", "require", "--tls-psk", psk.to_str().unwrap()],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    pool.ok(&["create-volume", "p", "--size", "16m"]);
    the_key_holder_alone_is_served(&pool.nbd, "p", &good, &other);
    // Without TLS at all: nothing.
    let out = Command::new("nbdinfo")
        .arg(pool.url("p"))
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
}
