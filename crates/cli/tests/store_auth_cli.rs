//! `store serve --cluster-key` and `volume serve --cluster-key` as real processes: a store
//! refuses to listen beyond loopback without a key; a volume proving its identity off-loads to
//! it, its client id is bound to that identity, and its data reads back after the store is
//! killed and restarted; a volume with the wrong key reaches nothing and off-loads nothing.
//! Needs qemu-io and nbdcopy (SKIPPED without them outside CI).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cordillera_testkit::process::{
    free_addr, have, qemu_io_patterns, Bounded, Proc, COMMAND_LIMIT,
};

const BIN: &str = env!("CARGO_BIN_EXE_cordillera");
const ALICE: &str = "8cd2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";
const BOB: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978";
const WRONG: &str = "00d2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";
const EXPORT_BYTES: u64 = 32 << 20;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn start_store(path: &Path, listen: &str, keys: &Path) -> Proc {
    let args = strings(&[
        "store",
        "serve",
        "--size",
        "64m",
        "--io",
        "buffered",
        "--listen",
        listen,
        "--path",
        path.to_str().unwrap(),
        "--cluster-key",
        keys.to_str().unwrap(),
    ]);
    Proc::spawn_until(Path::new(BIN), &args, &["cordillera store: listening on "])
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

/// A volume off-loading every write to `store`, proving `identity` with `keys`.
fn start_volume(
    base: &Path,
    store: SocketAddr,
    keys: &Path,
    identity: &str,
) -> (Proc, SocketAddr, SocketAddr) {
    std::fs::File::create(base)
        .unwrap()
        .set_len(EXPORT_BYTES + 8192)
        .unwrap();
    let args = strings(&[
        "volume",
        "serve",
        "--base",
        base.to_str().unwrap(),
        "--nbd",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
        "--format",
        "--store",
        &store.to_string(),
        "--policy",
        "always",
        "--cluster-key",
        keys.to_str().unwrap(),
        "--cluster-identity",
        identity,
    ]);
    let (server, found) = Proc::spawn_until(
        Path::new(BIN),
        &args,
        &[
            "cordillera volume: NBD export at nbd://",
            "cordillera volume: metrics at http://",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let metrics = found[1].trim_end_matches("/metrics").parse().unwrap();
    (server, found[0].parse().unwrap(), metrics)
}

fn status(metrics: SocketAddr) -> serde_json::Value {
    let out = Command::new(BIN)
        .args([
            "volume",
            "status",
            "--json",
            "--metrics",
            &metrics.to_string(),
        ])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn copy_out(url: &str, to: &Path) -> Vec<u8> {
    let out = Command::new("nbdcopy")
        .args([url, to.to_str().unwrap()])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(to).unwrap()
}

#[test]
fn a_store_listening_beyond_loopback_needs_a_cluster_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "store",
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--size",
            "16m",
            "--path",
        ])
        .arg(dir.path().join("s"))
        .output_within(COMMAND_LIMIT)
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains("--cluster-key"),
        "{text}"
    );
    let out = Command::new(BIN)
        .args([
            "store",
            "serve",
            "--http",
            "0.0.0.0:0",
            "--size",
            "16m",
            "--path",
        ])
        .arg(dir.path().join("s"))
        .output_within(COMMAND_LIMIT)
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && text.contains("--http"), "{text}");
}

#[test]
fn a_volume_with_the_cluster_key_offloads_and_reads_back_after_a_store_restart() {
    if !["qemu-io", "nbdcopy"].iter().all(|t| have(t)) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("cluster.psk");
    std::fs::write(&keys, format!("alice:{ALICE}\nbob:{BOB}\n")).unwrap();
    let listen = free_addr().unwrap().to_string();
    let store_path = dir.path().join("store");
    let mut store = start_store(&store_path, &listen, &keys);
    let store_addr: SocketAddr = listen.parse().unwrap();

    let (volume, nbd, metrics) =
        start_volume(&dir.path().join("a.img"), store_addr, &keys, "alice");
    let url = format!("nbd://{nbd}");
    qemu_io_patterns(&url, EXPORT_BYTES).unwrap_or_else(|e| panic!("{e}\n{}", volume.log()));
    let s = status(metrics);
    assert!(s["offloaded_writes"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["base_writes"].as_u64().unwrap(), 0, "{s}");
    let peers = std::fs::read_to_string(format!("{}.peers", store_path.display())).unwrap();
    assert!(
        peers.lines().count() == 1 && peers.ends_with(" alice\n"),
        "the volume's client id is bound to alice: {peers:?}"
    );
    let before = copy_out(&url, &dir.path().join("before.img"));

    // The store killed and started again on the same port: the volume reconnects (with its
    // key) and reads back what it off-loaded.
    store.kill();
    let _store = start_store(&store_path, &listen, &keys);
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let after = copy_out(&url, &dir.path().join("after.img"));
        if after == before || Instant::now() > deadline {
            break after;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        after == before,
        "the data read back after the restart differs\n{}",
        volume.log()
    );

    // A volume whose key for alice is wrong never gets past the handshake: its store counts
    // as unreachable, and a write that must be off-loaded (`--policy always`) fails with
    // ENOSPC after the full timeout; nothing reaches the store.
    let wrong = dir.path().join("wrong.psk");
    std::fs::write(&wrong, format!("alice:{WRONG}\n")).unwrap();
    let (forger, nbd, metrics) =
        start_volume(&dir.path().join("b.img"), store_addr, &wrong, "alice");
    let out = Command::new("qemu-io")
        .args([
            "-f",
            "raw",
            "-c",
            "write -P 0x5a 0 64k",
            &format!("nbd://{nbd}"),
        ])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("No space left on device"),
        "{text}\n{}",
        forger.log()
    );
    let s = status(metrics);
    assert_eq!(s["offloaded_writes"].as_u64().unwrap(), 0, "{s}");
    let log = forger.log();
    assert!(
        log.contains("store unreachable") && log.contains("TLS handshake failed"),
        "{log}"
    );
    let peers = std::fs::read_to_string(format!("{}.peers", store_path.display())).unwrap();
    assert_eq!(peers.lines().count(), 1, "{peers:?}");
}
