//! Recovery corner cases, driven on an in-memory disk whose every completed write is durable.

use cordillera_vstore::store::{Config, DiskDone, DiskOp, Reply, Request, Store};

const LOG_BYTES: u64 = 1 << 20;

/// Runs the store's disk operations to completion on `disk`, returning the replies.
fn settle(store: &mut Store, disk: &mut Vec<u8>) -> Vec<(u64, Reply)> {
    let mut replies = Vec::new();
    loop {
        let mut progress = false;
        while let Some(op) = store.poll_disk() {
            progress = true;
            let done = match op {
                DiskOp::Read {
                    id,
                    offset_bytes,
                    length_bytes,
                } => {
                    let (lo, hi) = (
                        offset_bytes as usize,
                        (offset_bytes + length_bytes) as usize,
                    );
                    if disk.len() < hi {
                        disk.resize(hi, 0);
                    }
                    DiskDone::Read {
                        id,
                        data: disk[lo..hi].to_vec(),
                    }
                }
                DiskOp::Write {
                    id,
                    offset_bytes,
                    data,
                    ..
                } => {
                    let (lo, hi) = (offset_bytes as usize, offset_bytes as usize + data.len());
                    if disk.len() < hi {
                        disk.resize(hi, 0);
                    }
                    disk[lo..hi].copy_from_slice(&data);
                    DiskDone::Written { id }
                }
                DiskOp::Flush { id } => DiskDone::Flushed { id },
            };
            store.handle_disk(0, done);
        }
        while let Some(reply) = store.poll_reply() {
            progress = true;
            replies.push(reply);
        }
        if !progress {
            return replies;
        }
    }
}

fn write(store: &mut Store, disk: &mut Vec<u8>, id: u64, offset_bytes: u64, version: u64) {
    store.handle_request(
        0,
        id,
        Request::Write {
            client: 7,
            volume: 1,
            offset_bytes,
            version,
            data: vec![version as u8; 4096],
        },
    );
    assert_eq!(settle(store, disk), vec![(id, Reply::Done)]);
}

fn recover(disk: &mut Vec<u8>) -> Store {
    let mut store = Store::recover(Config::new(LOG_BYTES), 3, 0);
    settle(&mut store, disk);
    assert!(store.is_ready(), "{}", store.describe());
    store
}

fn extents(store: &Store) -> Vec<(u64, u64, u64)> {
    store
        .clients()
        .into_iter()
        .flat_map(|(_, e)| e)
        .map(|e| (e.offset_bytes, e.length_bytes, e.version))
        .collect()
}

#[test]
fn records_written_after_an_empty_recovery_survive_the_next_one() {
    let mut disk = Vec::new();
    let mut store = Store::format(Config::new(LOG_BYTES), 9, 1);
    settle(&mut store, &mut disk);
    // A crash right after formatting: the next life finds no record at the tail.
    let mut store = recover(&mut disk);
    assert!(extents(&store).is_empty());
    write(&mut store, &mut disk, 1, 0, 5);
    write(&mut store, &mut disk, 2, 8192, 6);
    // Another crash before the tail pointer moved: both acknowledged writes are found.
    let store = recover(&mut disk);
    assert_eq!(extents(&store), vec![(0, 4096, 5), (8192, 4096, 6)]);
}

#[test]
fn records_survive_two_recoveries_in_a_row() {
    let mut disk = Vec::new();
    let mut store = Store::format(Config::new(LOG_BYTES), 9, 1);
    settle(&mut store, &mut disk);
    write(&mut store, &mut disk, 1, 0, 5);
    let mut store = recover(&mut disk);
    write(&mut store, &mut disk, 2, 4096, 6);
    let mut store = recover(&mut disk);
    write(&mut store, &mut disk, 3, 8192, 7);
    let store = recover(&mut disk);
    assert_eq!(
        extents(&store),
        vec![(0, 4096, 5), (4096, 4096, 6), (8192, 4096, 7)]
    );
}
