//! Deletion records across lives: a recovery that went on without a store never read the
//! records that store holds, so a later life must not apply them.

use super::*;

const BITS: u32 = VERSION_BITS;
const CLIENT: u64 = 7;
const VOLUME_BYTES: u64 = 1 << 20;

/// One store's contents: data extents of the client (start, end, version; every byte 9), and
/// deletion records (slot, version written, record) under its companion id.
struct Held {
    data: Vec<(u64, u64, u64)>,
    records: Vec<(u64, u64, DeletionRecord)>,
}

/// A restarted client (life 3: the superblock says 2) over three stores and a base volume that
/// carry out what it asks.
struct World {
    c: Client,
    now: Nanos,
    held: [Held; 3],
    base: Vec<u8>,
    /// Store 1 refuses, as "recovering", a delete of every deletion record it holds.
    refuse_clear: bool,
    sent: Vec<(StoreIdx, Request)>,
}

impl World {
    /// Restarts over `held`, every request answered, until ready.
    fn recover(held: [Held; 3], refuse_clear: bool) -> World {
        let mut config = Config::new(CLIENT, 1, VOLUME_BYTES);
        config.n_way = 2;
        config.request_timeout_ns = Some(1_000_000);
        let stores: Vec<StoreInfo> = (0..3)
            .map(|i| StoreInfo {
                id: 100 + i,
                server: i,
            })
            .collect();
        let sb = Superblock {
            generation: 2,
            degraded: true,
            stores,
        };
        let mut c = Client::recover(config, 10);
        let Some(BaseOp::Read { id, .. }) = c.poll_base() else {
            panic!("the superblock is read first");
        };
        c.handle_base(
            11,
            BaseDone::Read {
                id,
                data: sb.encode(),
            },
        );
        let mut w = World {
            c,
            now: 12,
            held,
            base: vec![0; 2 * VOLUME_BYTES as usize],
            refuse_clear,
            sent: Vec::new(),
        };
        while !w.c.is_ready() && w.now < 1_000_000 {
            w.step(1_000_000);
        }
        assert!(w.c.is_ready(), "{}", w.c.describe());
        w
    }

    fn run_until(&mut self, until: Nanos) {
        while self.now < until {
            self.step(until);
        }
    }

    /// Answers every request waiting (and those they lead to), then moves the clock to the
    /// client's next deadline (at most `until`).
    fn step(&mut self, until: Nanos) {
        loop {
            let mut answered = false;
            while let Some((store, id, request)) = self.c.poll_store() {
                let reply = self.store_reply(store, &request);
                self.sent.push((store, request));
                self.c.handle_store(self.now, store, id, reply, Some(0));
                answered = true;
            }
            while let Some(op) = self.c.poll_base() {
                let done = match op {
                    BaseOp::Read {
                        id,
                        offset_bytes,
                        length_bytes,
                    } => {
                        let (lo, hi) = (
                            offset_bytes as usize,
                            (offset_bytes + length_bytes) as usize,
                        );
                        BaseDone::Read {
                            id,
                            data: self.base[lo..hi].to_vec(),
                        }
                    }
                    BaseOp::Write {
                        id,
                        offset_bytes,
                        data,
                        ..
                    } => {
                        let lo = offset_bytes as usize;
                        self.base[lo..lo + data.len()].copy_from_slice(&data);
                        BaseDone::Written { id }
                    }
                    other => panic!("unexpected {other:?}"),
                };
                self.c.handle_base(self.now, done);
                answered = true;
            }
            if !answered {
                break;
            }
        }
        self.now = self
            .c
            .poll_timeout()
            .unwrap_or(until)
            .clamp(self.now + 1, until);
        self.c.handle_timeout(self.now);
    }

    fn store_reply(&mut self, store: StoreIdx, request: &Request) -> Reply {
        let h = &mut self.held[store];
        let extent = |offset_bytes, length_bytes, version| Extent {
            volume: 1,
            offset_bytes,
            length_bytes,
            version,
        };
        let records: Vec<(Extent, Vec<u8>)> = h
            .records
            .iter()
            .map(|(slot, v, r)| {
                let bytes = r.encode();
                (extent(slot << SLOT_SHIFT, bytes.len() as u64, *v), bytes)
            })
            .collect();
        match *request {
            Request::Metadata { client, .. } if client == CLIENT => Reply::Metadata(
                h.data
                    .iter()
                    .map(|&(lo, hi, v)| extent(lo, hi - lo, v))
                    .collect(),
            ),
            Request::Metadata { .. } => {
                Reply::Metadata(records.into_iter().map(|(e, _)| e).collect())
            }
            Request::Read { client, .. } if client != CLIENT => Reply::Read(records),
            Request::Read {
                offset_bytes,
                length_bytes,
                ..
            } => {
                let (lo, hi) = (offset_bytes, offset_bytes + length_bytes);
                Reply::Read(
                    h.data
                        .iter()
                        .filter(|d| d.0 <= lo && hi <= d.1)
                        .map(|d| (extent(lo, hi - lo, d.2), vec![9; (hi - lo) as usize]))
                        .collect(),
                )
            }
            Request::ReadAny { .. } => Reply::ReadAny(
                h.data
                    .first()
                    .map(|&(lo, hi, v)| (extent(lo, hi - lo, v), vec![9; (hi - lo) as usize])),
            ),
            Request::Delete { length_bytes, .. }
                if store == 1 && self.refuse_clear && length_bytes == 1 << 62 =>
            {
                Reply::Error(StoreError::Recovering)
            }
            Request::Delete {
                client,
                offset_bytes,
                length_bytes,
                version,
                ..
            } => {
                let (lo, hi) = (offset_bytes, offset_bytes + length_bytes);
                if client == CLIENT {
                    h.data
                        .retain(|d| !(lo <= d.0 && d.1 <= hi && d.2 <= version));
                } else {
                    h.records.retain(|&(slot, v, _)| {
                        !(lo <= slot << SLOT_SHIFT && slot << SLOT_SHIFT < hi && v <= version)
                    });
                }
                Reply::Done
            }
            _ => Reply::Done,
        }
    }

    /// Reads block 0 through the client.
    fn read_block_0(&mut self) -> Vec<u8> {
        self.c.handle_upward(
            self.now,
            1,
            Upward::Read {
                offset_bytes: 0,
                length_bytes: 4096,
            },
        );
        let until = self.now + 10_000_000;
        while self.now < until {
            self.step(until);
            if let Some((1, reply)) = self.c.poll_upward() {
                let UpReply::Read(data) = reply else {
                    panic!("{reply:?}");
                };
                return data;
            }
        }
        panic!("no answer: {}", self.c.describe());
    }
}

/// What life 3 finds (see the test below): block 0's copies (its last write, version 1:0x55)
/// on stores 0 and 1, life 1's record on store 1, life 2's on stores 0 and 2.
fn lives_1_and_2() -> [Held; 3] {
    let last = (1 << BITS) | 0x55;
    let usable = Config::new(CLIENT, 1, VOLUME_BYTES).usable_bytes();
    let life2 = DeletionRecord {
        target: 101,
        entries: vec![(0, usable, (2 << BITS) - 1)],
    };
    let life1 = DeletionRecord {
        target: 100,
        entries: vec![(0, 4096, last)],
    };
    [
        Held {
            data: vec![(0, 4096, last)],
            records: vec![(0, (2 << BITS) | 0x11, life2.clone())],
        },
        Held {
            data: vec![(0, 4096, last)],
            records: vec![(1, (1 << BITS) | 0x6c, life1)],
        },
        Held {
            data: Vec::new(),
            records: vec![(0, (2 << BITS) | 0x11, life2)],
        },
    ]
}

/// Life 1 wrote block 0 (its last write, version 1:0x55) to stores 0 and 1; store 0 then
/// failed, and the record "store 0: delete block 0 up to 1:0x55" reached store 1 only (the life
/// ended before it was durable). Life 2 recovered without store 1: it never read that record,
/// made store 0's copy current, and recorded on stores 0 and 2 that store 1 holds nothing of
/// earlier lives ("store 1: delete everything up to 1:max"). It ended before store 1 returned.
///
/// Life 3 reads every store. Applying life 1's record as well as life 2's left no copy of block
/// 0: a read returned the base volume's data beneath an acknowledged write (an off-load
/// simulation schedule, seed 7095979014337703383). Life 1's record is void — held only by a
/// store life 2 went on without — so store 0's copy is current and reaches the base volume;
/// store 1's records of earlier lives are deleted, then life 2's record, and nothing is left.
#[test]
fn a_record_that_only_a_store_missed_by_a_later_life_holds_is_void() {
    let mut w = World::recover(lives_1_and_2(), false);
    assert_eq!(w.read_block_0(), vec![9; 4096], "{}", w.c.describe());
    assert_eq!(w.c.stats().deletion_records_void, 1);
    w.run_until(w.now + 5_000_000_000);
    assert_eq!(w.read_block_0(), vec![9; 4096], "{}", w.c.describe());
    assert!(w.c.is_quiescent(), "{}", w.c.describe());
    assert!(
        w.held
            .iter()
            .all(|h| h.data.is_empty() && h.records.is_empty()),
        "{:?}",
        w.sent
    );
}

/// Life 2's record ("store 1 holds nothing of earlier lives") is what makes life 1's record on
/// store 1 void: it stays while that copy does. Store 1 refuses the delete of its old records
/// here, so it holds them still; its stale data copy is deleted meanwhile, which alone used to
/// let life 2's record go — and a crash then would have left life 1's record to the next life.
#[test]
fn the_record_that_voids_others_stays_until_they_are_deleted() {
    let mut w = World::recover(lives_1_and_2(), true);
    w.run_until(w.now + 50_000_000);
    assert_eq!(w.held[1].data, Vec::new(), "{:?}", w.sent);
    assert_eq!(w.held[1].records.len(), 1);
    for s in [0, 2] {
        assert_eq!(
            w.held[s].records.len(),
            1,
            "{}: {:?}",
            w.c.describe(),
            w.sent
        );
    }
    assert_eq!(w.read_block_0(), vec![9; 4096], "{}", w.c.describe());
}
