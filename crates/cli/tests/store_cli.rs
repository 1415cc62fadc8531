//! `cordillera store` as real processes: acknowledged writes survive SIGKILL during a write burst;
//! a client speaking garbage is dropped without disturbing others; `inspect` verifies the log.

use cordillera_testkit::process::{Bounded, COMMAND_LIMIT};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use cordillera_runtime::store_server::StoreClient;
use cordillera_vstore::store::{Reply, Request};

const BLOCK: u64 = 4096;

fn pattern(block: u64, version: u64) -> Vec<u8> {
    let mut data = vec![(block ^ version) as u8; BLOCK as usize];
    data[..8].copy_from_slice(&version.to_le_bytes());
    data
}

/// Runs `command` (a `cordillera` invocation printing JSON), which must succeed; its JSON.
fn cordillera_json(command: &mut Command) -> serde_json::Value {
    let out = command.output_within(COMMAND_LIMIT).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Starts `store serve` on a free port; returns the child and its address.
fn serve(path: &Path) -> (Child, SocketAddr) {
    serve_with(path, &[])
}

fn serve_with(path: &Path, extra: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cordillera"))
        .args([
            "store",
            "serve",
            "--size",
            "64m",
            "--listen",
            "127.0.0.1:0",
            "--path",
        ])
        .arg(path)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().expect("store serve exited early").unwrap();
        if let Some(addr) = line.strip_prefix("cordillera store: listening on ") {
            break addr.parse().unwrap();
        }
    };
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

#[test]
fn acknowledged_writes_survive_sigkill_during_a_burst() {
    // The default (`auto`: O_DIRECT where supported) and the page cache.
    for io in ["auto", "buffered"] {
        sigkill_during_a_burst(io);
    }
}

fn sigkill_during_a_burst(io: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let (mut child, addr) = serve_with(&path, &["--io", io]);
    let mut client = StoreClient::connect(addr).unwrap();
    let mut acked: HashMap<u64, u64> = HashMap::new();
    let mut issued: HashMap<u64, (u64, u64)> = HashMap::new(); // request id → (block, version)
    let mut version = 0;
    let mut outstanding = 0;
    let mut acks = 0;
    // A pipelined burst with 32 writes in flight; the store is killed mid-burst.
    let killed = loop {
        while outstanding < 32 {
            version += 1;
            let block = version * 7 % 256;
            let request = Request::Write {
                client: 1,
                volume: 1,
                offset_bytes: block * BLOCK,
                version,
                data: pattern(block, version),
            };
            match client.send(request) {
                Ok(id) => {
                    issued.insert(id, (block, version));
                    outstanding += 1;
                }
                Err(_) => break,
            }
        }
        if acks == 3_000 {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            break true;
        }
        match client.receive() {
            Ok((id, Reply::Done)) => {
                let (block, v) = issued[&id];
                let best = acked.entry(block).or_default();
                *best = (*best).max(v);
                outstanding -= 1;
                acks += 1;
            }
            Ok((_, other)) => panic!("unexpected reply {other:?}"),
            Err(_) => break false,
        }
    };
    assert!(killed && acks == 3_000);
    // Restart on the same file: every acknowledged write is there, at its version or a later one.
    let http = cordillera_testkit::process::free_addr()
        .unwrap()
        .to_string();
    let (mut child, addr) = serve_with(&path, &["--io", io, "--http", &http]);
    let mut client = StoreClient::connect(addr).unwrap();
    let mut checked = 0;
    for (block, &want) in &acked {
        let reply = client
            .call(Request::Read {
                client: 1,
                offset_bytes: block * BLOCK,
                length_bytes: BLOCK,
            })
            .unwrap();
        let Reply::Read(pieces) = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(
            pieces.len(),
            1,
            "block {block}: acknowledged version {want} lost"
        );
        let (extent, data) = &pieces[0];
        assert!(
            extent.version >= want,
            "block {block}: version {} older than acknowledged {want}",
            extent.version
        );
        assert!(
            extent.version <= version,
            "block {block}: version {} never written",
            extent.version
        );
        assert!(
            data == &pattern(*block, extent.version),
            "block {block}: wrong bytes"
        );
        checked += 1;
    }
    assert_eq!(checked, 256.min(acked.len()));
    // The load figures come back on every reply.
    let load = client.last_load.expect("load figures");
    assert!(load.log_bytes == 64 << 20 && load.used_bytes > 0);
    // The served status counts live data now, not what the restart found: one more block
    // written past every block the burst wrote adds exactly its bytes.
    let valid = |http: &str| {
        let body = cordillera_testkit::cluster::http_get(http, "/status").unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["valid_data_bytes"].as_u64().expect("valid_data_bytes")
    };
    let before = valid(&http);
    assert!(before > 0, "the burst left live data");
    let fresh = 1 << 20;
    let reply = client
        .call(Request::Write {
            client: 1,
            volume: 1,
            offset_bytes: fresh * BLOCK,
            version: version + 1,
            data: pattern(fresh, version + 1),
        })
        .unwrap();
    assert_eq!(reply, Reply::Done);
    assert_eq!(
        valid(&http),
        before + BLOCK,
        "the status's live bytes after one more block"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // Offline inspection verifies the log the burst left.
    let json = cordillera_json(
        Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(["store", "inspect", "--json", "--path"])
            .arg(&path),
    );
    assert!(json["records_verified"].as_u64().unwrap() >= 3_000);
    // The burst's blocks and the one written after the restart.
    assert_eq!(
        json["clients"][0]["ranges"].as_array().unwrap().len(),
        acked.len().min(256) + 1
    );
    assert_eq!(
        json["valid_data_bytes"].as_u64(),
        Some(before + BLOCK),
        "inspect and the served status count the same live bytes"
    );
}

#[test]
fn garbage_drops_one_connection_not_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = serve(&dir.path().join("store"));
    let mut good = StoreClient::connect(addr).unwrap();
    assert_eq!(
        good.call(Request::Write {
            client: 3,
            volume: 1,
            offset_bytes: 0,
            version: 1,
            data: vec![9; 512]
        })
        .unwrap(),
        Reply::Done
    );
    let mut bad = std::net::TcpStream::connect(addr).unwrap();
    bad.write_all(&[0xff; 64]).unwrap();
    let mut buf = [0u8; 16];
    use std::io::Read;
    assert_eq!(
        bad.read(&mut buf).unwrap_or(0),
        0,
        "the garbage connection is closed"
    );
    // The good connection and the data are unaffected; a zero-length write is refused cleanly.
    let reply = good
        .call(Request::Read {
            client: 3,
            offset_bytes: 0,
            length_bytes: 512,
        })
        .unwrap();
    assert!(
        matches!(&reply, Reply::Read(p) if p.len() == 1 && p[0].1 == vec![9; 512]),
        "{reply:?}"
    );
    let refused = good
        .call(Request::Write {
            client: 3,
            volume: 1,
            offset_bytes: 0,
            version: 2,
            data: Vec::new(),
        })
        .unwrap();
    assert_eq!(
        refused,
        Reply::Error(cordillera_vstore::store::StoreError::BadRequest)
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Writes of every size arriving in pieces of every size (large writes have their data read
/// straight into their own buffers, small ones are decoded from the frame buffer) are stored
/// whole and in order; a connection cut inside a large write's data stores nothing of it.
#[test]
fn writes_arriving_in_pieces_are_stored_whole() {
    use cordillera_wire::store::{decode, encode, Frame};
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = serve(&dir.path().join("store"));
    let sizes = [
        1 << 20,
        512,
        (16 << 10) - 512,
        16 << 10,
        20 << 10,
        65536,
        4096,
        3 << 20,
    ];
    let data = |i: usize, size: usize| -> Vec<u8> {
        (0..size)
            .map(|b| (b as u64 * 31 + i as u64 * 7 + b as u64 / 4096) as u8)
            .collect()
    };
    let mut offsets = Vec::new();
    let mut frames = Vec::new();
    let mut at = 0u64;
    for (i, &size) in sizes.iter().enumerate() {
        offsets.push(at);
        encode(
            &Frame::Request {
                id: i as u64 + 1,
                request: Request::Write {
                    client: 5,
                    volume: 1,
                    offset_bytes: at,
                    version: 1,
                    data: data(i, size),
                },
            },
            &mut frames,
        );
        at += size as u64;
    }
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    // Pieces of 1 byte to 200 KiB, now and then a pause so that the server reads what is there.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut sent = 0;
    while sent < frames.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let piece = match x % 4 {
            0 => 1 + (x >> 8) as usize % 64,
            1 => 1 + (x >> 8) as usize % 4096,
            _ => 1 + (x >> 8) as usize % (200 << 10),
        }
        .min(frames.len() - sent);
        stream.write_all(&frames[sent..sent + piece]).unwrap();
        sent += piece;
        if x.is_multiple_of(3) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let mut replies = Vec::new();
    let mut buffer = Vec::new();
    while replies.len() < sizes.len() {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "the store closed the connection");
        buffer.extend_from_slice(&chunk[..n]);
        while let Some((frame, used)) = decode(&buffer).unwrap() {
            buffer.drain(..used);
            if let Frame::Reply { id, reply, .. } = frame {
                assert_eq!(reply, Reply::Done, "write {id}");
                replies.push(id);
            }
        }
    }
    replies.sort();
    assert_eq!(replies, (1..=sizes.len() as u64).collect::<Vec<_>>());
    // A large write cut inside its data: nothing of it is stored, nothing else disturbed.
    let mut cut = Vec::new();
    encode(
        &Frame::Request {
            id: 99,
            request: Request::Write {
                client: 5,
                volume: 1,
                offset_bytes: 0,
                version: 2,
                data: vec![0xee; 1 << 20],
            },
        },
        &mut cut,
    );
    stream.write_all(&cut[..cut.len() / 2]).unwrap();
    drop(stream);
    let mut client = StoreClient::connect(addr).unwrap();
    for (i, &size) in sizes.iter().enumerate() {
        let reply = client
            .call(Request::Read {
                client: 5,
                offset_bytes: offsets[i],
                length_bytes: size as u64,
            })
            .unwrap();
        let Reply::Read(pieces) = reply else {
            panic!("read {i}: {reply:?}")
        };
        let mut got = Vec::new();
        for (extent, bytes) in pieces {
            assert_eq!(extent.version, 1, "write {i}: the cut write left nothing");
            got.extend_from_slice(&bytes);
        }
        assert!(
            got == data(i, size),
            "write {i} of {size} bytes came back changed"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn store_bench_prints_the_four_ratios() {
    if !cordillera_testkit::process::have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The memory-file-system ceiling, where there is one.
    let memory = tempfile::tempdir_in("/dev/shm").ok();
    let mut command = Command::new(env!("CARGO_BIN_EXE_cordillera"));
    command.args(["store", "bench"]);
    if let Some(m) = &memory {
        command.arg("--memory-dir").arg(m.path());
    }
    let json = cordillera_json(
        command
            .args([
                "--bytes",
                "32m",
                "--ceiling-bytes",
                "32m",
                "--device-seconds",
                "1",
                "--latency-requests",
                "200",
                "--json",
                "--keep",
                "--dir",
            ])
            .arg(dir.path()),
    );
    for ratio in [
        "ratio_64k_throughput",
        "ratio_4k_throughput",
        "ratio_p99_ack_latency",
        "ratio_recovery_scan",
    ] {
        let value = json[ratio].as_f64().unwrap_or(f64::NAN);
        assert!(value.is_finite() && value > 0.0, "{ratio}: {value}");
    }
    for ratio in [
        "ratio_transport_ceiling",
        "ratio_log_floor",
        "ratio_device_streaming",
    ] {
        let value = json[ratio].as_f64().unwrap_or(f64::NAN);
        assert!(value.is_finite() && value > 0.0, "{ratio}: {value}");
    }
    assert!(json["pinned"].is_boolean(), "pinned: {}", json["pinned"]);
    // The transport ratios are medians of slice-by-slice ratios, with their spread beside them.
    for (median, spread, all) in [
        (
            "ratio_transport_ceiling",
            "slices_ratio_transport_ceiling",
            "ratio_transport_ceiling_all_bytes",
        ),
        (
            "ratio_log_floor",
            "slices_ratio_log_floor",
            "ratio_log_floor_all_bytes",
        ),
    ] {
        let m = json[median].as_f64().unwrap();
        let p = json[spread]
            .as_array()
            .unwrap_or_else(|| panic!("{spread}: {}", json[spread]))
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect::<Vec<_>>();
        assert!(
            p.len() == 2 && p[0] <= m && m <= p[1],
            "{spread} {p:?} around {m}"
        );
        let a = json[all].as_f64().unwrap_or(f64::NAN);
        assert!(a.is_finite() && a > 0.0, "{all}: {a}");
    }
    for figure in ["store_64k_memory_mb_per_s", "store_4k_memory_mb_per_s"] {
        match &memory {
            Some(_) => {
                let value = json[figure].as_f64().unwrap_or(f64::NAN);
                assert!(value.is_finite() && value > 0.0, "{figure}: {value}");
            }
            None => assert!(json[figure].is_null(), "{figure} without --memory-dir"),
        }
    }
    // How many requests each server took per batch in the memory runs: at least one, as
    // every batch counted carried a request.
    for figure in [
        "store_memory_records_per_flush_64k",
        "store_memory_records_per_flush_4k",
        "log_floor_frames_per_write_64k",
        "log_floor_frames_per_write_4k",
        "sink_frames_per_read_64k",
        "sink_frames_per_read_4k",
    ] {
        let value = json[figure].as_f64().unwrap_or(f64::NAN);
        assert!(value.is_finite() && value >= 1.0, "{figure}: {value}");
    }
    eprintln!("{json:#}");
    // `inspect` verifies the log the benchmark wrote: 32 MiB of 64 KiB records.
    let json = cordillera_json(
        Command::new(env!("CARGO_BIN_EXE_cordillera"))
            .args(["store", "inspect", "--json", "--path"])
            .arg(dir.path().join("bench-65536.store")),
    );
    assert_eq!(json["records_verified"], 512);
    assert_eq!(json["valid_data_bytes"], 32 << 20);
}

#[test]
fn o_direct_store_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    // O_DIRECT needs a file system that supports it (tmpfs does not).
    let probe = dir.path().join("probe");
    {
        use std::os::unix::fs::OpenOptionsExt;
        if std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&probe)
            .is_err()
        {
            eprintln!(
                "SKIPPED o_direct_store_survives_sigkill: {} does not support O_DIRECT",
                dir.path().display()
            );
            return;
        }
    }
    let path = dir.path().join("store");
    let (mut child, addr) = serve_with(&path, &["--io", "direct"]);
    let mut client = StoreClient::connect(addr).unwrap();
    for block in 0..64u64 {
        let reply = client
            .call(Request::Write {
                client: 2,
                volume: 1,
                offset_bytes: block * BLOCK + 100,
                version: block + 1,
                data: pattern(block, block + 1)[..1000].to_vec(),
            })
            .unwrap();
        assert_eq!(reply, Reply::Done);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, addr) = serve_with(&path, &["--io", "direct"]);
    let mut client = StoreClient::connect(addr).unwrap();
    for block in 0..64u64 {
        // Unaligned ranges read back exactly through aligned O_DIRECT transfers.
        let reply = client
            .call(Request::Read {
                client: 2,
                offset_bytes: block * BLOCK + 100,
                length_bytes: 1000,
            })
            .unwrap();
        let Reply::Read(pieces) = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces[0].1, pattern(block, block + 1)[..1000].to_vec());
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Resident memory of a process, from `/proc`.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// A well-behaved client's write and read, which must be answered promptly.
fn served(good: &mut StoreClient, version: u64) {
    let started = std::time::Instant::now();
    assert_eq!(
        good.call(Request::Write {
            client: 9,
            volume: 1,
            offset_bytes: 0,
            version,
            data: pattern(0, version)
        })
        .unwrap(),
        Reply::Done
    );
    let reply = good
        .call(Request::Read {
            client: 9,
            offset_bytes: 0,
            length_bytes: BLOCK,
        })
        .unwrap();
    assert!(
        matches!(&reply, Reply::Read(p) if p.len() == 1 && p[0].1 == pattern(0, version)),
        "{reply:?}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "a well-behaved client waited {:?}",
        started.elapsed()
    );
}

/// A client that sends thousands of 16 MiB reads and never reads the replies: the store keeps
/// serving others, and its memory stays within its budgets (it grew to 15 GiB before).
#[test]
fn a_client_that_never_reads_its_replies_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = serve_with(&dir.path().join("store"), &["--sparse"]);
    let mut good = StoreClient::connect(addr).unwrap();
    // 16 MiB of live data for the reads to return.
    for i in 0..16u64 {
        assert_eq!(
            good.call(Request::Write {
                client: 3,
                volume: 1,
                offset_bytes: i << 20,
                version: 1,
                data: vec![i as u8; 1 << 20],
            })
            .unwrap(),
            Reply::Done
        );
    }
    let before = rss_bytes(child.id());
    let mut bad = std::net::TcpStream::connect(addr).unwrap();
    let mut frames = Vec::new();
    for id in 0..2_700u64 {
        cordillera_wire::store::encode(
            &cordillera_wire::store::Frame::Request {
                id: id + 1,
                request: Request::Read {
                    client: 3,
                    offset_bytes: 0,
                    length_bytes: 16 << 20,
                },
            },
            &mut frames,
        );
    }
    bad.set_nonblocking(true).unwrap();
    // Whatever the socket takes; the rest would wait in the client (it never reads anyway).
    let mut sent = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sent < frames.len() && std::time::Instant::now() < deadline {
        match bad.write(&frames[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => panic!("{e}"),
        }
    }
    let mut peak = 0;
    for round in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        served(&mut good, 10 + round);
        peak = peak.max(rss_bytes(child.id()));
    }
    println!(
        "store memory: {} MiB before, peak {} MiB with {sent} of {} request bytes sent by a client that never reads",
        before >> 20,
        peak >> 20,
        frames.len()
    );
    // 64 MiB connection budget, one reply over it at most, buffers: far below unbounded.
    assert!(
        peak < before + (192 << 20),
        "store grew from {before} to {peak} bytes"
    );
    drop(bad);
    served(&mut good, 100);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Out of file descriptors: the store stays alive, and once the idle connections close it
/// serves a new client (it used to stop accepting for good).
#[test]
fn descriptor_exhaustion_leaves_the_store_serving() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut child = Command::new("sh")
        .args([
            "-c",
            "ulimit -n 256 && exec \"$0\" \"$@\"",
            env!("CARGO_BIN_EXE_cordillera"),
            "store",
            "serve",
            "--size",
            "64m",
            "--sparse",
            "--listen",
            "127.0.0.1:0",
            "--path",
        ])
        .arg(&path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let addr: SocketAddr = loop {
        let line = lines.next().expect("store serve exited early").unwrap();
        if let Some(addr) = line.strip_prefix("cordillera store: listening on ") {
            break addr.parse().unwrap();
        }
    };
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let idle: Vec<std::net::TcpStream> = (0..300)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "the store exited");
    drop(idle);
    // Descriptors free up: a new client is served within the backoff (≤ 1 s) and then some.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut good = StoreClient::connect(addr).unwrap();
    served(&mut good, 1);
    let warned = log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("cannot accept connections"));
    assert!(
        warned,
        "no warning about descriptors: {:?}",
        log.lock().unwrap()
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Reads a connection to its end (within 5 s): `Err` unless the store closed it, having sent at
/// most load broadcasts (every registered connection may get one, a silent one included).
fn closed_with_only_load_broadcasts(s: &mut std::net::TcpStream) -> Result<(), String> {
    use std::io::Read;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("not closed: {e}")),
        }
    }
    let mut at = 0;
    while at < bytes.len() {
        match cordillera_wire::store::decode(&bytes[at..]) {
            Ok(Some((cordillera_wire::store::Frame::Load(_), used))) => at += used,
            other => return Err(format!("sent {other:?} before closing it")),
        }
    }
    Ok(())
}

/// Beyond `--max-connections`, new connections are closed at once; the others are served.
/// With every slot taken, a new client takes the slot of the oldest connection that never
/// sent anything (a socket left half-open, or a flood of them), and is served at once; when
/// every connection has spoken and none has been idle for long, the new one is closed.
#[test]
fn a_full_store_gives_a_silent_connections_slot_to_a_new_client() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = serve_with(
        &dir.path().join("store"),
        &["--sparse", "--max-connections", "3"],
    );
    use std::io::Read;
    let mut first = StoreClient::connect(addr).unwrap();
    served(&mut first, 1);
    let mut silent: Vec<std::net::TcpStream> = (0..2)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    // Two new clients take the silent ones' slots, oldest first, and are served at once.
    let mut second = StoreClient::connect(addr).unwrap();
    served(&mut second, 2);
    let mut third = StoreClient::connect(addr).unwrap();
    served(&mut third, 3);
    for s in &mut silent {
        closed_with_only_load_broadcasts(s).unwrap_or_else(|e| panic!("a silent connection: {e}"));
    }
    // Every slot is held by a client that spoke just now: a fourth is closed at once.
    let mut extra = std::net::TcpStream::connect(addr).unwrap();
    extra
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16];
    let started = std::time::Instant::now();
    assert_eq!(extra.read(&mut buf).unwrap_or(1), 0, "the fourth is closed");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    served(&mut first, 4);
    served(&mut third, 5);
    drop(second);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut again = StoreClient::connect(addr).unwrap();
    served(&mut again, 6);
    child.kill().unwrap();
    child.wait().unwrap();
}
