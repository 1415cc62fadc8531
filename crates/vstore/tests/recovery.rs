//! Recovery corner cases, driven on an in-memory disk whose every completed write is durable.

mod common;

use common::complete_on;
use cordillera_vstore::store::{Config, DiskDone, DiskOp, Reply, Request, Store};

const LOG_BYTES: u64 = 1 << 20;

/// Runs the store's disk operations to completion on `disk`, returning the replies.
fn settle(store: &mut Store, disk: &mut Vec<u8>) -> Vec<(u64, Reply)> {
    let mut replies = Vec::new();
    loop {
        let mut progress = false;
        while let Some(op) = store.poll_disk() {
            progress = true;
            let done = complete_on(disk, op);
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

/// Lets the store write its tail pointer (it does so once idle).
fn persist_tail(store: &mut Store, disk: &mut Vec<u8>) {
    if let Some(at) = store.poll_timeout() {
        store.handle_timeout(at);
    }
    settle(store, disk);
}

/// A recovery that finds no record holds acknowledgements until a superblock naming the new
/// life's epoch is durable. When the log's end is near, the writes queued meanwhile wrap the log
/// and start the next lap's epoch before that superblock lands: the store must still acknowledge
/// them (it used to compare with the current epoch and never acknowledged again).
#[test]
fn writes_that_wrap_the_log_before_an_empty_recovery_is_recorded_are_acknowledged() {
    let mut disk = Vec::new();
    let mut store = Store::format(Config::new(LOG_BYTES), 9, 1);
    settle(&mut store, &mut disk);
    // Overwrite one block until the head is near the log's end; every older record is dead, so
    // the tail follows the head and the tail pointer names an empty log.
    let mut version = 1;
    loop {
        write(&mut store, &mut disk, version, 0, version);
        version += 1;
        persist_tail(&mut store, &mut disk);
        if store.superblock().tail + 6 * 8192 > LOG_BYTES {
            break;
        }
    }
    store.handle_request(
        0,
        version,
        Request::Delete {
            client: 7,
            volume: 1,
            offset_bytes: 0,
            length_bytes: 4096,
            version,
            generation: 0,
        },
    );
    settle(&mut store, &mut disk);
    persist_tail(&mut store, &mut disk);
    let near_end = store.superblock().tail;
    assert!(near_end + 6 * 8192 > LOG_BYTES, "{}", store.describe());

    // Crash; the next life finds no record at the tail and queues its epoch's superblock.
    let mut store = Store::recover(Config::new(LOG_BYTES), 3, 0);
    while !store.is_ready() {
        let op = store.poll_disk().expect("recovery reads");
        let DiskOp::Read {
            id,
            offset_bytes,
            length_bytes,
        } = op
        else {
            panic!("recovery writes before it is ready: {op:?}")
        };
        let (lo, hi) = (
            offset_bytes as usize,
            (offset_bytes + length_bytes) as usize,
        );
        disk.resize(disk.len().max(hi), 0);
        store.handle_disk(
            0,
            DiskDone::Read {
                id,
                data: disk[lo..hi].to_vec(),
            },
        );
    }
    // Writes arrive before that superblock is durable, enough to wrap the log.
    let first = version + 1;
    let count = 12;
    for i in 0..count {
        store.handle_request(
            0,
            first + i,
            Request::Write {
                client: 7,
                volume: 1,
                offset_bytes: 4096 * (i + 1),
                version: first + i,
                data: vec![i as u8; 4096],
            },
        );
    }
    let replies = settle(&mut store, &mut disk);
    let expected: Vec<(u64, Reply)> = (0..count).map(|i| (first + i, Reply::Done)).collect();
    assert_eq!(replies, expected, "{}", store.describe());
    let head: u64 = store
        .describe()
        .strip_prefix("head ")
        .and_then(|s| s.split(' ').next())
        .and_then(|h| h.parse().ok())
        .expect("describe starts with the head");
    assert!(
        head < near_end,
        "the writes wrapped the log: {}",
        store.describe()
    );
    // And the next recovery finds every acknowledged write.
    let store = recover(&mut disk);
    let found = extents(&store);
    assert_eq!(found.len(), count as usize, "{found:?}");
}

const GEN: u32 = cordillera_vstore::store::GENERATION_SHIFT;

fn request(store: &mut Store, disk: &mut Vec<u8>, id: u64, request: Request) -> Reply {
    store.handle_request(0, id, request);
    let replies = settle(store, disk);
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0].0, id);
    replies[0].1.clone()
}

/// A newer incarnation's metadata request fences the older one's writes and deletes, still in
/// the network, from then on; the fence is in the superblock before the answer, and survives a
/// restart; other clients and the newer generation are untouched.
#[test]
fn metadata_fences_a_deposed_incarnation_across_restarts() {
    use cordillera_vstore::store::StoreError;
    let mut disk = Vec::new();
    let mut store = Store::format(Config::new(LOG_BYTES), 9, 1);
    settle(&mut store, &mut disk);
    let old = 1u64 << GEN | 4;
    write(&mut store, &mut disk, 1, 0, old);
    // Generation 2 recovers: its metadata request lists generation 1's write.
    let meta = Request::Metadata {
        client: 7,
        generation: 2,
    };
    store.handle_request(0, 2, meta);
    assert_eq!(
        store.poll_reply(),
        None,
        "answered before the fence is durable"
    );
    let replies = settle(&mut store, &mut disk);
    assert!(
        matches!(&replies[..], [(2, Reply::Metadata(e))] if e.len() == 1),
        "{replies:?}"
    );
    assert_eq!(store.superblock().fences, vec![(7, 2)]);
    let late_write = |v: u64| Request::Write {
        client: 7,
        volume: 1,
        offset_bytes: 4096,
        version: v,
        data: vec![1; 4096],
    };
    let late_delete = |generation: u64| Request::Delete {
        client: 7,
        volume: 1,
        offset_bytes: 0,
        length_bytes: 4096,
        version: old,
        generation,
    };
    for mut store in [store, recover(&mut disk)] {
        assert_eq!(store.fence(7), 2);
        assert_eq!(
            request(&mut store, &mut disk, 3, late_write(1 << GEN | 9)),
            Reply::Error(StoreError::Fenced)
        );
        assert_eq!(
            request(&mut store, &mut disk, 4, late_delete(1)),
            Reply::Error(StoreError::Fenced)
        );
        assert_eq!(store.stats().fenced_refusals, 2);
        assert_eq!(extents(&store), vec![(0, 4096, old)]);
        // Another client, and generation 2 itself, are served.
        store.handle_request(
            0,
            5,
            Request::Write {
                client: 8,
                volume: 1,
                offset_bytes: 0,
                version: 1 << GEN | 1,
                data: vec![2; 4096],
            },
        );
        assert_eq!(settle(&mut store, &mut disk), vec![(5, Reply::Done)]);
        assert_eq!(
            request(&mut store, &mut disk, 6, late_write(2 << GEN | 1)),
            Reply::Done
        );
    }
    // An older generation's metadata request lowers nothing.
    let mut store = recover(&mut disk);
    let reply = request(
        &mut store,
        &mut disk,
        7,
        Request::Metadata {
            client: 7,
            generation: 1,
        },
    );
    assert!(matches!(reply, Reply::Metadata(_)), "{reply:?}");
    assert_eq!(store.fence(7), 2);
}

/// The fence table has room for a bounded number of clients: one more is served unfenced
/// (counted), never a corrupt superblock or a refused recovery.
#[test]
fn a_client_beyond_the_fence_table_is_served_unfenced() {
    use cordillera_vstore::format::FENCES_MAX;
    let mut disk = Vec::new();
    let mut store = Store::format(Config::new(LOG_BYTES), 9, 1);
    settle(&mut store, &mut disk);
    for client in 0..=FENCES_MAX as u64 {
        let reply = request(
            &mut store,
            &mut disk,
            client + 1,
            Request::Metadata {
                client,
                generation: 3,
            },
        );
        assert!(matches!(reply, Reply::Metadata(_)), "{client}: {reply:?}");
    }
    assert_eq!(store.stats().unfenced_metadata, 1);
    assert_eq!(store.fence(FENCES_MAX as u64), 0);
    let store = recover(&mut disk);
    assert_eq!(store.superblock().fences.len(), FENCES_MAX);
    assert_eq!(store.fence(FENCES_MAX as u64 - 1), 3);
}

/// Like `settle`, but superblock writes and the flushes issued after them are held back
/// (returned, not performed): what the store answers while its new superblock is not durable.
fn settle_holding_superblocks(
    store: &mut Store,
    disk: &mut Vec<u8>,
) -> (Vec<(u64, Reply)>, Vec<DiskOp>) {
    use cordillera_vstore::format::LOG_OFFSET;
    let mut replies = Vec::new();
    let mut held = Vec::new();
    loop {
        let mut progress = false;
        while let Some(op) = store.poll_disk() {
            progress = true;
            let done = match op {
                DiskOp::Write { offset_bytes, .. } if offset_bytes < LOG_OFFSET => {
                    held.push(op);
                    continue;
                }
                DiskOp::Flush { .. } if !held.is_empty() => {
                    held.push(op);
                    continue;
                }
                op => complete_on(disk, op),
            };
            store.handle_disk(0, done);
        }
        while let Some(reply) = store.poll_reply() {
            progress = true;
            replies.push(reply);
        }
        if !progress {
            return (replies, held);
        }
    }
}

/// A newer incarnation's write or delete fences the older ones as its metadata request does:
/// the store may never have seen that request (it was lost, or the store was down), and a
/// deposed incarnation's write still in the network must not land after the newer one's
/// delete of every older version. The newer request is answered only once the raised fence is
/// durable, so the fence survives a crash right after the answer.
#[test]
fn a_newer_generations_write_or_delete_fences_the_older_ones() {
    use cordillera_vstore::store::StoreError;
    for raising in ["delete", "empty delete", "write"] {
        let mut disk = Vec::new();
        let mut store = Store::format(Config::new(LOG_BYTES), 9, 1);
        settle(&mut store, &mut disk);
        let old = 2u64 << GEN | 1;
        write(&mut store, &mut disk, 1, 0, old);
        let newer = match raising {
            // Generation 3 deletes every older version of [0, 4096): the write above.
            "delete" => Request::Delete {
                client: 7,
                volume: 1,
                offset_bytes: 0,
                length_bytes: 4096,
                version: (3 << GEN) - 1,
                generation: 3,
            },
            // A delete that removes nothing writes no record, and still fences.
            "empty delete" => Request::Delete {
                client: 7,
                volume: 1,
                offset_bytes: 1 << 16,
                length_bytes: 4096,
                version: (3 << GEN) - 1,
                generation: 3,
            },
            _ => Request::Write {
                client: 7,
                volume: 1,
                offset_bytes: 1 << 16,
                version: 3 << GEN | 1,
                data: vec![3; 4096],
            },
        };
        store.handle_request(0, 2, newer);
        let (replies, held) = settle_holding_superblocks(&mut store, &mut disk);
        assert_eq!(
            replies,
            vec![],
            "{raising}: answered before its fence is durable"
        );
        assert_eq!(held.len(), 2, "{raising}: one superblock carries the fence");
        for op in held {
            let done = complete_on(&mut disk, op);
            store.handle_disk(0, done);
        }
        assert_eq!(
            settle(&mut store, &mut disk),
            vec![(2, Reply::Done)],
            "{raising}"
        );
        assert_eq!(store.superblock().fences, vec![(7, 3)], "{raising}");
        // Generation 2's write, sent before generation 3 existed, arrives late.
        let late = Request::Write {
            client: 7,
            volume: 1,
            offset_bytes: 0,
            version: 2 << GEN | 2,
            data: vec![2; 4096],
        };
        for mut store in [store, recover(&mut disk)] {
            assert_eq!(store.fence(7), 3, "{raising}");
            assert_eq!(
                request(&mut store, &mut disk, 3, late.clone()),
                Reply::Error(StoreError::Fenced),
                "{raising}"
            );
            let kept: Vec<u64> = extents(&store).iter().map(|e| e.0).collect();
            let expected: &[u64] = match raising {
                "delete" => &[],
                "empty delete" => &[0],
                _ => &[0, 1 << 16],
            };
            assert_eq!(kept, expected, "{raising}");
        }
    }
}
