//! The server's own tests: flush placement, store files, frames as they arrive.

use super::*;
use std::os::unix::fs::MetadataExt;

#[test]
fn flushes_leave_the_task_after_two_slow_ones_and_come_back_later() {
    let mut place = FlushPlace::default();
    assert!(place.inline());
    place.took(Duration::from_micros(20));
    assert!(place.inline(), "a fast flush keeps them here");
    place.took(Duration::from_millis(3));
    assert!(place.inline(), "one slow flush alone may be a preemption");
    place.took(Duration::from_micros(20));
    place.took(Duration::from_millis(3));
    assert!(
        place.inline(),
        "a fast one between slow ones keeps them here"
    );
    place.took(Duration::from_millis(3));
    assert!(
        !place.inline(),
        "a second slow one in a row sends the next ones to the workers"
    );
    place.passed(FlushPlace::AWAY - 1);
    assert!(!place.inline());
    place.passed(1);
    assert!(place.inline(), "then one is tried here again");
    place.took(Duration::from_millis(3));
    assert!(place.inline(), "and it takes two slow ones again to leave");
    place.took(Duration::from_millis(3));
    assert!(!place.inline());
}

/// Writes of every size about the one above which data is read into its own buffer, sent
/// back to back (several frames, and a large write's data and the next frame's head, in one
/// read) and then in pieces of a few bytes (a head, or data, cut anywhere): every write is
/// answered once and reads back as written.
#[test]
fn writes_arriving_together_or_in_pieces_are_each_kept_as_sent() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let addr = serve_in_thread(ServeOptions::local(dir.path().join("s"), 64 << 20)).unwrap();
    let sizes = [
        512,
        DIRECT_DATA_MIN - 512,
        DIRECT_DATA_MIN,
        DIRECT_DATA_MIN + 512,
        64 << 10,
        4096,
        HEAD_READ + 512,
        (128 << 10) + 512,
        1024,
    ];
    let mut offset = 0u64;
    let mut written = Vec::new();
    for (round, piece) in [None, Some(7usize), Some(4093)].into_iter().enumerate() {
        let mut frames = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            let data: Vec<u8> = (0..size).map(|b| (b * 31 + i * 7 + round) as u8).collect();
            let request = Request::Write {
                client: 1,
                volume: 1,
                offset_bytes: offset,
                version: 1 + written.len() as u64,
                data: data.clone(),
            };
            encode(
                &Frame::Request {
                    id: 1 + written.len() as u64,
                    request,
                },
                &mut frames,
            );
            written.push((offset, data));
            offset += (size as u64).div_ceil(512) * 512;
        }
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        // A frame left undecoded in the store's buffer shows as replies that never come.
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        match piece {
            None => stream.write_all(&frames).unwrap(),
            Some(piece) => {
                for chunk in frames.chunks(piece) {
                    stream.write_all(chunk).unwrap();
                    if chunk.len() < 64 {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            }
        }
        let mut answered = std::collections::BTreeSet::new();
        let mut buffer = Vec::new();
        while answered.len() < sizes.len() {
            match decode(&buffer).unwrap() {
                Some((Frame::Reply { id, reply, .. }, used)) => {
                    buffer.drain(..used);
                    assert_eq!(reply, Reply::Done, "write {id}");
                    assert!(answered.insert(id), "write {id} answered twice");
                }
                Some((_, used)) => {
                    buffer.drain(..used);
                }
                None => {
                    let mut chunk = [0u8; 4096];
                    let n = stream.read(&mut chunk).unwrap_or_else(|e| {
                        panic!("{} of {} writes answered: {e}", answered.len(), sizes.len())
                    });
                    assert!(n > 0, "the store closed the connection");
                    buffer.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
    let mut client = StoreClient::connect(addr).unwrap();
    for (offset, data) in written {
        let reply = client
            .call(Request::Read {
                client: 1,
                offset_bytes: offset,
                length_bytes: data.len() as u64,
            })
            .unwrap();
        let Reply::Read(pieces) = reply else {
            panic!("read at {offset}: {reply:?}");
        };
        let got: Vec<u8> = pieces.into_iter().flat_map(|(_, d)| d).collect();
        assert!(got == data, "the write at {offset} reads back otherwise");
    }
}

#[test]
fn a_new_store_has_its_log_filled_unless_sparse() {
    let dir = tempfile::tempdir().unwrap();
    let log = 8 << 20;
    for (name, sparse) in [("filled", false), ("sparse", true)] {
        let path = dir.path().join(name);
        let (_, store) = open_store(&path, log, 7, IoMode::Auto, sparse).unwrap();
        assert!(store.is_ready());
        let allocated = std::fs::metadata(&path).unwrap().blocks() * 512;
        if sparse {
            assert!(allocated < log / 2, "{name}: {allocated} bytes allocated");
        } else {
            assert!(
                allocated >= LOG_OFFSET + log,
                "{name}: {allocated} bytes allocated"
            );
        }
        let mut creating = path.clone().into_os_string();
        creating.push(".creating");
        assert!(
            !PathBuf::from(creating).exists(),
            "{name}: temporary file left"
        );
        // It opens again as the same store.
        let (_, again) = open_store(&path, 0, 8, IoMode::Auto, false).unwrap();
        assert_eq!(again.store_id(), store.store_id());
    }
}

#[test]
fn a_half_created_store_is_never_opened_and_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    // What a crash while creating leaves: a temporary file, nothing at the store's path.
    std::fs::write(dir.path().join("s.creating"), vec![0u8; 70_000]).unwrap();
    let (_, store) = open_store(&path, 1 << 20, 3, IoMode::Auto, false).unwrap();
    assert!(store.is_ready());
    assert!(!dir.path().join("s.creating").exists());
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        LOG_OFFSET + (1 << 20)
    );
}

#[test]
fn bad_log_sizes_are_refused_without_leaving_files() {
    let dir = tempfile::tempdir().unwrap();
    for size in [1000, 4096, (1 << 20) + 1] {
        let path = dir.path().join(format!("s{size}"));
        let Err(e) = open_store(&path, size, 1, IoMode::Auto, false) else {
            panic!("log size {size} accepted");
        };
        assert!(e.to_string().contains("log size"), "{e}");
        assert!(!path.exists());
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
