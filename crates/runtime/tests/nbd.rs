//! The NBD server against unmodified clients (nbdinfo, qemu-io, nbdcopy) and against a raw
//! socket sending bad requests. Tests that need a client program say SKIPPED when it is absent
//! (`scripts/test.sh` installs them).

use cordillera_testkit::process::{Bounded, COMMAND_LIMIT};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::Arc;

use cordillera_runtime::nbd_server::{
    serve_in_background, Backend, Completion, ExportConfig, FileBackend, Op,
};
use cordillera_wire::nbd;

const EXPORT_BYTES: u64 = 64 << 20;

/// A server on a fresh file, on its own runtime thread; returns its address and the file.
fn start() -> (SocketAddr, tempfile::NamedTempFile) {
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().set_len(EXPORT_BYTES).unwrap();
    let backend: Arc<dyn Backend> = Arc::new(FileBackend::open(file.path()).unwrap());
    (
        start_backend(backend, ExportConfig::default().in_flight_max),
        file,
    )
}

/// A server for `backend` on its own runtime thread.
fn start_backend(backend: Arc<dyn Backend>, in_flight_max: usize) -> SocketAddr {
    let config = ExportConfig {
        name: "vol".into(),
        in_flight_max,
        ..ExportConfig::default()
    };
    serve_in_background(backend, config).unwrap()
}

use cordillera_testkit::process::{have, qemu_io_patterns};

#[test]
fn nbdinfo_lists_the_export() {
    if !have("nbdinfo") {
        return;
    }
    let (addr, _file) = start();
    let out = Command::new("nbdinfo")
        .args(["--json", &format!("nbd://{addr}/vol")])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("\"export-size\": {EXPORT_BYTES}")),
        "{text}"
    );
    assert!(text.contains("\"block_size_minimum\": 512"), "{text}");
    let list = Command::new("nbdinfo")
        .args(["--list", &format!("nbd://{addr}")])
        .output_within(COMMAND_LIMIT)
        .unwrap();
    assert!(list.status.success());
    assert!(String::from_utf8_lossy(&list.stdout).contains("export=\"vol\""));
}

#[test]
fn qemu_io_patterns_read_back_at_many_offsets() {
    if !have("qemu-io") {
        return;
    }
    let (addr, _file) = start();
    if let Err(text) = qemu_io_patterns(&format!("nbd://{addr}/vol"), EXPORT_BYTES) {
        panic!("{text}");
    }
}

#[test]
fn nbdcopy_copies_in_and_out_byte_identically() {
    if !have("nbdcopy") {
        return;
    }
    let (addr, _file) = start();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.img");
    let output = dir.path().join("out.img");
    let data: Vec<u8> = (0..EXPORT_BYTES)
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    std::fs::write(&input, &data).unwrap();
    let url = format!("nbd://{addr}/vol");
    for (from, to) in [
        (input.to_str().unwrap(), url.as_str()),
        (url.as_str(), output.to_str().unwrap()),
    ] {
        let out = Command::new("nbdcopy")
            .args([from, to])
            .output_within(COMMAND_LIMIT)
            .unwrap();
        assert!(
            out.status.success(),
            "nbdcopy {from} {to}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        std::fs::read(&output).unwrap() == data,
        "the copy out equals the copy in"
    );
}

/// Connects and negotiates with NBD_OPT_GO by hand.
fn raw_connect(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).unwrap();
    assert_eq!(greeting, nbd::greeting());
    s.write_all(&(nbd::FLAG_C_FIXED_NEWSTYLE | nbd::FLAG_C_NO_ZEROES).to_be_bytes())
        .unwrap();
    // An unknown option first: answered NBD_REP_ERR_UNSUP, and haggling goes on.
    let option = |s: &mut TcpStream, opt: u32, payload: &[u8]| {
        let mut h = nbd::IHAVEOPT.to_be_bytes().to_vec();
        h.extend_from_slice(&opt.to_be_bytes());
        h.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        h.extend_from_slice(payload);
        s.write_all(&h).unwrap();
    };
    let reply = |s: &mut TcpStream| -> (u32, Vec<u8>) {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).unwrap();
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let mut data = vec![0u8; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
        s.read_exact(&mut data).unwrap();
        (kind, data)
    };
    option(&mut s, 99, b"");
    assert_eq!(reply(&mut s).0, nbd::REP_ERR_UNSUP);
    option(&mut s, nbd::OPT_GO, &[0, 0, 0, 200]);
    assert_eq!(
        reply(&mut s).0,
        nbd::REP_ERR_INVALID,
        "a truncated GO payload"
    );
    option(&mut s, nbd::OPT_GO, &[0, 0, 0, 3, b'v', b'o', b'l', 0, 0]);
    loop {
        let (kind, _) = reply(&mut s);
        if kind == nbd::REP_ACK {
            break s;
        }
        assert_eq!(kind, nbd::REP_INFO);
    }
}

fn send(
    s: &mut TcpStream,
    command: nbd::Command,
    flags: u16,
    handle: u64,
    offset: u64,
    data: &[u8],
    length: u32,
) {
    let r = nbd::Request {
        flags,
        command,
        handle,
        offset,
        length,
    };
    s.write_all(&nbd::encode_request(&r)).unwrap();
    s.write_all(data).unwrap();
}

fn receive(s: &mut TcpStream) -> (u64, u32) {
    let mut h = [0u8; 16];
    s.read_exact(&mut h).unwrap();
    assert_eq!(
        u32::from_be_bytes(h[..4].try_into().unwrap()),
        nbd::SIMPLE_REPLY_MAGIC
    );
    (
        u64::from_be_bytes(h[8..16].try_into().unwrap()),
        u32::from_be_bytes(h[4..8].try_into().unwrap()),
    )
}

#[test]
fn bad_requests_get_error_replies_and_the_connection_and_data_survive() {
    let (addr, _file) = start();
    let mut s = raw_connect(addr);
    let block = vec![0x5au8; 4096];
    send(
        &mut s,
        nbd::Command::Write,
        nbd::CMD_FLAG_FUA,
        1,
        8192,
        &block,
        4096,
    );
    assert_eq!(receive(&mut s), (1, 0));
    // Beyond the end, misaligned, unknown command, unknown flag, zero length.
    send(
        &mut s,
        nbd::Command::Read,
        0,
        2,
        EXPORT_BYTES - 512,
        &[],
        1024,
    );
    send(&mut s, nbd::Command::Read, 0, 3, 100, &[], 512);
    send(&mut s, nbd::Command::Other(42), 0, 4, 0, &[], 512);
    send(&mut s, nbd::Command::Read, 1 << 12, 5, 0, &[], 512);
    send(
        &mut s,
        nbd::Command::Write,
        0,
        6,
        EXPORT_BYTES,
        &block,
        4096,
    );
    let mut errors: Vec<(u64, u32)> = (0..5).map(|_| receive(&mut s)).collect();
    errors.sort();
    assert_eq!(
        errors,
        vec![
            (2, nbd::EINVAL),
            (3, nbd::EINVAL),
            (4, nbd::EINVAL),
            (5, nbd::EINVAL),
            (6, nbd::ENOSPC)
        ]
    );
    // Many requests in flight: all answered, the data is intact.
    for h in 10..74u64 {
        send(&mut s, nbd::Command::Read, 0, h, 8192, &[], 4096);
    }
    let mut seen = Vec::new();
    for _ in 10..74 {
        let (handle, error) = receive(&mut s);
        assert_eq!(error, 0);
        let mut data = vec![0u8; 4096];
        s.read_exact(&mut data).unwrap();
        assert_eq!(data, block);
        seen.push(handle);
    }
    seen.sort();
    assert_eq!(seen, (10..74).collect::<Vec<_>>());
    send(&mut s, nbd::Command::Flush, 0, 80, 0, &[], 0);
    assert_eq!(receive(&mut s), (80, 0));
    // A frame with a bad magic number ends this connection only.
    s.write_all(&[0xde; 28]).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty());
    // A truncated write, then the peer goes away: the server carries on.
    let mut t = raw_connect(addr);
    send(&mut t, nbd::Command::Write, 0, 1, 0, &block[..100], 4096);
    drop(t);
    let mut u = raw_connect(addr);
    send(&mut u, nbd::Command::Read, 0, 9, 8192, &[], 4096);
    assert_eq!(receive(&mut u), (9, 0));
    let mut data = vec![0u8; 4096];
    u.read_exact(&mut data).unwrap();
    assert_eq!(
        data, block,
        "acknowledged data survives bad requests and broken connections"
    );
    send(&mut u, nbd::Command::Disc, 0, 10, 0, &[], 0);
    let mut rest = Vec::new();
    let _ = u.read_to_end(&mut rest);
    assert!(rest.is_empty(), "no reply to NBD_CMD_DISC");
}

/// A file export that loses every read of the first block: it drops the request's completion.
struct Forgetful(FileBackend);

impl Backend for Forgetful {
    fn length_bytes(&self) -> u64 {
        self.0.length_bytes()
    }

    fn submit(&self, op: Op, done: Completion) {
        match op {
            Op::Read { offset: 0, .. } => drop(done),
            op => self.0.submit(op, done),
        }
    }
}

#[test]
fn a_dropped_request_is_answered_eio_and_large_and_small_replies_interleave_intact() {
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().set_len(EXPORT_BYTES).unwrap();
    let addr = start_backend(
        Arc::new(Forgetful(FileBackend::open(file.path()).unwrap())),
        ExportConfig::default().in_flight_max,
    );
    let mut s = raw_connect(addr);
    // 1 MiB of a pattern at 1 MiB, written in 4 KiB pieces with 32 in flight.
    let image: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    for (i, piece) in image.chunks(4096).enumerate() {
        send(
            &mut s,
            nbd::Command::Write,
            0,
            i as u64,
            (1 << 20) + i as u64 * 4096,
            piece,
            4096,
        );
        if i >= 32 {
            assert_eq!(receive(&mut s).1, 0);
        }
    }
    for _ in 0..32 {
        assert_eq!(receive(&mut s).1, 0);
    }
    // Large and small reads in flight together, and one the backend drops.
    let mut expected = std::collections::HashMap::new();
    for h in 0..40u64 {
        let (offset, length) = if h % 4 == 0 {
            (1u64 << 20, 1u32 << 20)
        } else {
            ((1 << 20) + h * 4096, 4096)
        };
        send(&mut s, nbd::Command::Read, 0, h, offset, &[], length);
        let at = (offset - (1 << 20)) as usize;
        expected.insert(h, image[at..at + length as usize].to_vec());
    }
    send(&mut s, nbd::Command::Read, 0, 99, 0, &[], 4096);
    let mut eio = false;
    for _ in 0..41 {
        let (handle, error) = receive(&mut s);
        if handle == 99 {
            assert_eq!(error, nbd::EIO, "the dropped request is answered");
            eio = true;
            continue;
        }
        assert_eq!(error, 0);
        let want = expected.remove(&handle).expect("each handle answered once");
        let mut data = vec![0u8; want.len()];
        s.read_exact(&mut data).unwrap();
        assert!(data == want, "read {handle} intact");
    }
    assert!(eio && expected.is_empty());
    // The connection goes on.
    send(&mut s, nbd::Command::Flush, 0, 100, 0, &[], 0);
    assert_eq!(receive(&mut s), (100, 0));
}

/// Resident memory of this process (each test is its own process under nextest).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

#[test]
fn a_client_that_does_not_read_its_replies_is_not_read_from_past_the_in_flight_limit() {
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().set_len(EXPORT_BYTES).unwrap();
    let addr = start_backend(Arc::new(FileBackend::open(file.path()).unwrap()), 4);
    let mut s = raw_connect(addr);
    let before = resident_bytes();
    // 256 reads of 1 MiB sent without reading a reply: answered all at once, they would be
    // 256 MiB waiting in the server.
    for h in 0..256u64 {
        send(
            &mut s,
            nbd::Command::Read,
            0,
            h,
            (h % 32) << 20,
            &[],
            1 << 20,
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let grown = resident_bytes().saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "the server holds {} MiB of unread replies",
        grown >> 20
    );
    // Every request is still answered, in full.
    let mut seen = Vec::new();
    for _ in 0..256 {
        let (handle, error) = receive(&mut s);
        assert_eq!(error, 0);
        let mut data = vec![0u8; 1 << 20];
        s.read_exact(&mut data).unwrap();
        seen.push(handle);
    }
    seen.sort();
    assert_eq!(seen, (0..256).collect::<Vec<_>>());
    println!(
        "resident memory grew {} MiB with 256 unread 1 MiB replies",
        grown >> 20
    );
}

/// Bytes count as well as requests: 128 reads of 16 MiB fit the in-flight limit but not the
/// connection's 64 MiB memory budget, so the server stops reading the client instead of
/// holding 2 GiB of replies; another client is served meanwhile.
#[test]
fn large_unread_replies_are_bounded_by_bytes_and_others_are_served() {
    let (addr, _file) = start();
    let mut s = raw_connect(addr);
    let before = resident_bytes();
    for h in 0..128u64 {
        send(
            &mut s,
            nbd::Command::Read,
            0,
            h,
            (h % 4) << 24,
            &[],
            16 << 20,
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(800));
    let grown = resident_bytes().saturating_sub(before);
    let mut good = raw_connect(addr);
    let started = std::time::Instant::now();
    send(
        &mut good,
        nbd::Command::Write,
        0,
        7,
        4096,
        &[5u8; 4096],
        4096,
    );
    assert_eq!(receive(&mut good), (7, 0));
    send(&mut good, nbd::Command::Read, 0, 8, 4096, &[], 4096);
    assert_eq!(receive(&mut good), (8, 0));
    let mut data = vec![0u8; 4096];
    good.read_exact(&mut data).unwrap();
    assert_eq!(data, vec![5u8; 4096]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    println!(
        "resident memory grew {} MiB with 128 unread 16 MiB replies",
        grown >> 20
    );
    assert!(
        grown < 160 << 20,
        "the server holds {} MiB of unread replies",
        grown >> 20
    );
}

/// Connections that never finish the handshake (they connect and send nothing) fill every
/// connection slot; they are closed after the handshake timeout, and a real client is served
/// then. Before, they held the slots for ever and every real client got EOF.
#[test]
fn connections_that_never_finish_the_handshake_are_closed_and_free_their_slots() {
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().set_len(EXPORT_BYTES).unwrap();
    let backend: Arc<dyn Backend> = Arc::new(FileBackend::open(file.path()).unwrap());
    let mut config = ExportConfig {
        name: "vol".into(),
        handshake_timeout: std::time::Duration::from_millis(1500),
        ..ExportConfig::default()
    };
    config.limits.connections = 8;
    let addr = serve_in_background(backend, config).unwrap();
    let silent: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    // Every slot is held by a client that never answers the greeting: a real client takes
    // the slot of the oldest one at once, and is served.
    let started = std::time::Instant::now();
    let mut good = raw_connect(addr);
    send(&mut good, nbd::Command::Read, 0, 1, 0, &[], 4096);
    assert_eq!(receive(&mut good), (1, 0));
    let mut block = vec![0u8; 4096];
    good.read_exact(&mut block).unwrap();
    let served = started.elapsed();
    assert!(
        served < std::time::Duration::from_millis(1000),
        "served after {served:?}: it waited for a handshake timeout"
    );
    let mut byte = [0u8; 1];
    let mut closed = 0;
    for (i, mut s) in silent.into_iter().enumerate() {
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut greeting = [0u8; 18];
        s.read_exact(&mut greeting).unwrap();
        let ended = matches!(s.read(&mut byte), Ok(0) | Err(_));
        assert!(
            ended,
            "silent client {i} is disconnected (its slot, or the timeout)"
        );
        closed += 1;
    }
    assert_eq!(closed, 8);
    // The real client is untouched (established connections keep their slots).
    send(&mut good, nbd::Command::Read, 0, 2, 4096, &[], 4096);
    assert_eq!(receive(&mut good), (2, 0));
}
