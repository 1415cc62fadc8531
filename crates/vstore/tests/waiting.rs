//! A store whose clients write faster than its disk: requests wait for room, and the work per
//! request must not grow with the number waiting.

use std::collections::VecDeque;

use cordillera_vstore::store::{Config, DiskOp, Reply, Request, Store};

mod common;
use common::complete_on;

const LOG_BYTES: u64 = 4 << 20;
const BLOCK: u64 = 4096;

/// An in-memory disk that completes operations in order, `per_round` at a time.
struct SlowDisk {
    bytes: Vec<u8>,
    queue: VecDeque<DiskOp>,
}

impl SlowDisk {
    fn take(&mut self, store: &mut Store) {
        while let Some(op) = store.poll_disk() {
            self.queue.push_back(op);
        }
    }

    fn complete(&mut self, store: &mut Store, count: usize) {
        for _ in 0..count {
            self.take(store);
            let Some(op) = self.queue.pop_front() else {
                return;
            };
            let done = complete_on(&mut self.bytes, op);
            store.handle_disk(0, done);
        }
    }
}

/// Overwrites of a working set of half the log, `arrivals` requests per disk operation
/// completed, then everything settled. Returns (requests answered, refused as full, seconds).
fn run(requests: u64, arrivals: u64) -> (u64, u64, u64, f64) {
    let started = std::time::Instant::now();
    let mut disk = SlowDisk {
        bytes: Vec::new(),
        queue: VecDeque::new(),
    };
    let mut store = Store::format(Config::new(LOG_BYTES), 1, 1);
    disk.complete(&mut store, 1000);
    assert!(store.is_ready());
    let blocks = LOG_BYTES / 2 / BLOCK;
    let (mut answered, mut full) = (0, 0);
    for id in 0..requests {
        store.handle_request(
            0,
            id,
            Request::Write {
                client: 7,
                volume: 1,
                offset_bytes: (id * 7919 % blocks) * BLOCK,
                version: id + 1,
                data: vec![id as u8; BLOCK as usize],
            },
        );
        if id % arrivals == 0 {
            disk.complete(&mut store, 1);
        }
        while let Some((_, reply)) = store.poll_reply() {
            answered += 1;
            full += matches!(reply, Reply::Error(_)) as u64;
        }
    }
    while answered < requests {
        disk.complete(&mut store, 1000);
        store.handle_timeout(u64::MAX / 2);
        while let Some((_, reply)) = store.poll_reply() {
            answered += 1;
            full += matches!(reply, Reply::Error(_)) as u64;
        }
    }
    let retries = store.stats().waiting_retries;
    (answered, full, retries, started.elapsed().as_secs_f64())
}

#[test]
fn a_full_store_retries_each_waiting_request_a_bounded_number_of_times() {
    for requests in [2_000u64, 8_000] {
        let (answered, refused, retries, seconds) = run(requests, 4);
        eprintln!(
            "{requests} requests: {answered} answered, {refused} refused as full, \
             {retries} retries of waiting requests, {seconds:.2} s"
        );
        assert_eq!(answered, requests);
        assert!(
            refused > 0 && refused < requests,
            "the store must both wait and refuse"
        );
        assert!(
            retries <= 4 * requests,
            "{retries} retries for {requests} requests: the work per request grows with the \
             number waiting"
        );
    }
}
