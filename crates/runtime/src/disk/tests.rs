use super::*;

fn ops_complete(mode: IoMode) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    let file = DiskFile::open(&path, true, mode);
    let Ok(file) = file else {
        eprintln!(
            "SKIPPED {mode:?}: {} does not support it",
            dir.path().display()
        );
        return;
    };
    file.file.set_len(1 << 20).unwrap();
    let (sender, receiver) = mpsc::channel();
    let disk = Disk::start(Arc::new(file), move |done| sender.send(done).unwrap());
    // Consecutive writes (merged), a gap, a durable write, a flush, then reads.
    let block = |i: u64| vec![i as u8 + 1; 4096];
    let mut ops: Vec<DiskOp> = (0..40)
        .map(|i| DiskOp::Write {
            id: i,
            offset_bytes: i * 4096,
            data: block(i).into(),
            durable: false,
        })
        .collect();
    ops.push(DiskOp::Write {
        id: 100,
        offset_bytes: 100 * 4096,
        data: block(100).into(),
        durable: false,
    });
    ops.push(DiskOp::Write {
        id: 101,
        offset_bytes: 101 * 4096,
        data: block(101).into(),
        durable: true,
    });
    disk.submit_all(ops);
    let mut written: Vec<u64> = (0..42)
        .map(|_| match receiver.recv().unwrap().unwrap() {
            DiskDone::Written { id } => id,
            other => panic!("{other:?}"),
        })
        .collect();
    written.sort();
    let want: Vec<u64> = (0..40).chain([100, 101]).collect();
    assert_eq!(written, want, "every write completes once");
    disk.submit_all([
        DiskOp::Flush { id: 200 },
        DiskOp::Read {
            id: 201,
            offset_bytes: 0,
            length_bytes: 40 * 4096,
        },
        // Unaligned, and running past the end of the file (zeros).
        DiskOp::Read {
            id: 202,
            offset_bytes: 101 * 4096 + 7,
            length_bytes: (1 << 20) - 101 * 4096,
        },
    ]);
    let mut seen = 0;
    for _ in 0..3 {
        match receiver.recv().unwrap().unwrap() {
            DiskDone::Flushed { id } => assert_eq!(id, 200),
            DiskDone::Read { id: 201, data } => {
                let want: Vec<u8> = (0..40).flat_map(block).collect();
                assert!(data == want, "merged writes read back");
            }
            DiskDone::Read { id: 202, data } => {
                assert_eq!(data.len() as u64, (1 << 20) - 101 * 4096);
                assert!(data[..4089].iter().all(|&b| b == 102));
                assert!(data[4089..].iter().all(|&b| b == 0));
            }
            other => panic!("{other:?}"),
        }
        seen += 1;
    }
    assert_eq!(seen, 3);
    disk.stop();
}

#[test]
fn buffered_operations_complete_with_merged_writes() {
    ops_complete(IoMode::Buffered);
}

#[test]
fn direct_operations_complete_with_merged_writes() {
    ops_complete(IoMode::Direct);
}

#[test]
fn a_reused_direct_buffer_writes_only_its_own_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let Ok(file) = DiskFile::open(&dir.path().join("d"), true, IoMode::Direct) else {
        eprintln!("SKIPPED: {} has no O_DIRECT", dir.path().display());
        return;
    };
    file.file.set_len(8 << 20).unwrap();
    // A full pooled buffer of 0xaa, then smaller writes that reuse it.
    let big = vec![0xaa; MAX_BATCH_BYTES];
    file.write_batch(4 << 20, &[&big]).unwrap();
    file.write_batch(0, &[&[1u8; 512], &[2u8; 1024]]).unwrap();
    file.write_batch(4096, &[&[3u8; 512]]).unwrap();
    let back = file.read(0, 8192, Vec::new()).unwrap();
    assert!(back[..512].iter().all(|&b| b == 1));
    assert!(back[512..1536].iter().all(|&b| b == 2));
    assert!(back[1536..4096].iter().all(|&b| b == 0), "stale pool bytes");
    assert!(back[4096..4608].iter().all(|&b| b == 3));
    assert!(back[4608..].iter().all(|&b| b == 0), "stale pool bytes");
    assert_eq!(
        file.buffers.free.lock().unwrap().len(),
        1,
        "one buffer, reused"
    );
}

#[test]
fn vectored_writes_cover_every_slice() {
    let dir = tempfile::tempdir().unwrap();
    let file = File::create(dir.path().join("v")).unwrap();
    // Empty slices too, first and last among them (records without padding).
    let mut slices: Vec<Vec<u8>> = (0..3000).map(|i| vec![(i % 251) as u8; i % 7]).collect();
    slices.push(Vec::new());
    let refs: Vec<&[u8]> = slices.iter().map(|s| s.as_slice()).collect();
    write_all_vectored_at(&file, &refs, 10).unwrap();
    let back = std::fs::read(dir.path().join("v")).unwrap();
    assert_eq!(&back[..10], &[0u8; 10]);
    assert!(
        back[10..] == slices.concat()[..],
        "more slices than one pwritev takes"
    );
}
