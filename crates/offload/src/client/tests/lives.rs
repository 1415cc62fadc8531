//! Deletion records across lives: a recovery that went on without a store never read the
//! records that store holds, so a later life must not apply them.

use super::*;

const BITS: u32 = VERSION_BITS;
const CLIENT: u64 = 7;
const VOLUME_BYTES: u64 = 1 << 20;

/// One store's contents: data extents of the client (start, end, version; every byte 9, or
/// the first byte of the write that put it there), and deletion records (slot, version
/// written, record) under its companion id.
#[derive(Clone, Default)]
struct Held {
    data: Vec<(u64, u64, u64)>,
    records: Vec<(u64, u64, DeletionRecord)>,
    /// The byte of an extent written by the client (start, version → byte); others are 9.
    fill: Vec<((u64, u64), u8)>,
}

impl Held {
    fn fill_of(&self, start: u64, version: u64) -> u8 {
        self.fill
            .iter()
            .find(|(k, _)| *k == (start, version))
            .map_or(9, |(_, b)| *b)
    }
}

/// How a life starts: the superblock it reads, the base volume beneath, and stores that
/// misbehave.
struct Start {
    /// The superblock's generation (the life is the next one).
    generation: u64,
    degraded: bool,
    base: Vec<u8>,
    /// Store 1 refuses, as "recovering", a delete of every deletion record it holds.
    refuse_clear: bool,
    /// This store refuses, as "recovering", every delete of the client's data.
    refuse_data_deletes: Option<StoreIdx>,
    /// This store never answers.
    silent: Option<StoreIdx>,
}

impl Default for Start {
    fn default() -> Start {
        Start {
            generation: 2,
            degraded: true,
            base: vec![0; 2 * VOLUME_BYTES as usize],
            refuse_clear: false,
            refuse_data_deletes: None,
            silent: None,
        }
    }
}

/// A restarted client (life 3: the superblock says 2) over three stores and a base volume that
/// carry out what it asks.
struct World {
    c: Client,
    now: Nanos,
    held: [Held; 3],
    base: Vec<u8>,
    start: Start,
    sent: Vec<(StoreIdx, Request)>,
}

impl World {
    /// Restarts over `held`, every request answered, until ready.
    fn recover(held: [Held; 3], refuse_clear: bool) -> World {
        World::start(
            held,
            Start {
                refuse_clear,
                ..Start::default()
            },
        )
    }

    /// Restarts over `held` as `start` says, until ready.
    fn start(held: [Held; 3], start: Start) -> World {
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
            generation: start.generation,
            degraded: start.degraded,
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
            base: start.base.clone(),
            start,
            sent: Vec::new(),
        };
        while !w.c.is_ready() && w.now < 20_000_000_000 {
            w.step(20_000_000_000);
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
                if self.start.silent == Some(store) {
                    continue;
                }
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
                        .map(|d| {
                            let byte = h.fill_of(d.0, d.2);
                            (extent(lo, hi - lo, d.2), vec![byte; (hi - lo) as usize])
                        })
                        .collect(),
                )
            }
            Request::ReadAny { .. } => Reply::ReadAny(h.data.first().map(|&(lo, hi, v)| {
                let byte = h.fill_of(lo, v);
                (extent(lo, hi - lo, v), vec![byte; (hi - lo) as usize])
            })),
            Request::Write {
                client,
                offset_bytes,
                version,
                ref data,
                ..
            } => {
                if client == CLIENT {
                    let hi = offset_bytes + data.len() as u64;
                    h.data.push((offset_bytes, hi, version));
                    h.fill.push(((offset_bytes, version), data[0]));
                } else {
                    let record = DeletionRecord::decode(data).expect("a deletion record");
                    h.records
                        .push((offset_bytes >> SLOT_SHIFT, version, record));
                }
                Reply::Done
            }
            Request::Delete { length_bytes, .. }
                if store == 1 && self.start.refuse_clear && length_bytes == 1 << 62 =>
            {
                Reply::Error(StoreError::Recovering)
            }
            Request::Delete { client, .. }
                if client == CLIENT && self.start.refuse_data_deletes == Some(store) =>
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

impl World {
    /// Writes block 0 full of `byte` through the client, until acknowledged.
    fn write_block_0(&mut self, byte: u8) {
        self.c.handle_upward(
            self.now,
            2,
            Upward::Write {
                offset_bytes: 0,
                data: vec![byte; 4096],
                durable: true,
            },
        );
        let until = self.now + 10_000_000;
        while self.now < until {
            self.step(until);
            if let Some((2, reply)) = self.c.poll_upward() {
                assert_eq!(reply, UpReply::Written, "{}", self.c.describe());
                return;
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
            ..Held::default()
        },
        Held {
            data: vec![(0, 4096, last)],
            records: vec![(1, (1 << BITS) | 0x6c, life1)],
            ..Held::default()
        },
        Held {
            data: Vec::new(),
            records: vec![(0, (2 << BITS) | 0x11, life2)],
            ..Held::default()
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

/// An earlier life reclaimed block 0 (its copy, version 1:0x47, on store 0, the data on the
/// base volume) and began recording "store 0: delete block 0 up to 1:0x47" on stores 1 and 2
/// (N = 2), store 0 being down; the life ended with the record on store 1 only, not durable.
///
/// Life 3 reads every store and finds the copy on store 0 and the record on store 1. Store 0
/// refuses its deletes for now. A write of block 0 is acknowledged. Life 4 recovers while
/// store 1 is down: it cannot read that record. If life 3 had taken the record as durable and
/// written block 0 to the base volume only, life 4 would find store 0's copy unrecorded and
/// current, and a read would return it, older than the acknowledged write (an off-load
/// simulation schedule with a cache on the request path, seed 6420687145012712629, where the
/// cache's pre-load read it). A record found on fewer than N stores counts as no record: the
/// copy blocks base writes over it until it is deleted or recorded again, durably.
#[test]
fn a_deletion_record_found_on_fewer_than_n_stores_is_not_taken_as_durable() {
    let old = (1 << BITS) | 0x47;
    let record = DeletionRecord {
        target: 100,
        entries: vec![(0, 4096, old)],
    };
    let held = [
        Held {
            data: vec![(0, 4096, old)],
            ..Held::default()
        },
        Held {
            records: vec![(1, (1 << BITS) | 0x6a, record)],
            ..Held::default()
        },
        Held::default(),
    ];
    let mut base = vec![0; 2 * VOLUME_BYTES as usize];
    base[..4096].fill(9);
    let mut life3 = World::start(
        held,
        Start {
            degraded: false,
            base,
            refuse_data_deletes: Some(0),
            ..Start::default()
        },
    );
    assert_eq!(filled_with(&life3.read_block_0()), Some(9));
    life3.write_block_0(5);
    assert_eq!(filled_with(&life3.read_block_0()), Some(5));
    life3.run_until(life3.now + 20_000_000);
    let World { held, base, .. } = life3;
    let mut life4 = World::start(
        held,
        Start {
            generation: 3,
            degraded: false,
            base,
            silent: Some(1),
            ..Start::default()
        },
    );
    assert_eq!(
        filled_with(&life4.read_block_0()),
        Some(5),
        "life 4 read something older than the acknowledged write: {}",
        life4.c.describe()
    );
}

/// The byte every byte of `data` is, if they are all one.
fn filled_with(data: &[u8]) -> Option<u8> {
    let first = *data.first()?;
    data.iter().all(|&b| b == first).then_some(first)
}

/// Life 1's record "store 0: delete block 0 up to 1:0x47" is on stores 1 and 2; life 2
/// recovered without store 1 and recorded so on stores 0 and 2 ("store 1 holds nothing of
/// earlier lives"), which voids store 1's copy of life 1's record. Life 3 reads every store: the
/// record has one copy it may apply (store 2's), so it is not durable for a later life that goes
/// on without store 2 and, by life 2's record, ignores store 1's copy. Counted as durable (two
/// copies found, the void one too), life 3 wrote block 0 to the base volume over store 0's
/// copy, and life 4, without store 2, made that copy current.
#[test]
fn a_void_copy_of_a_deletion_record_does_not_make_it_durable() {
    let old = (1 << BITS) | 0x47;
    let usable = Config::new(CLIENT, 1, VOLUME_BYTES).usable_bytes();
    let life1 = DeletionRecord {
        target: 100,
        entries: vec![(0, 4096, old)],
    };
    let life2 = DeletionRecord {
        target: 101,
        entries: vec![(0, usable, (2 << BITS) - 1)],
    };
    let marker = (0, (2 << BITS) | 0x11, life2);
    let record = (1, (1 << BITS) | 0x6a, life1);
    let held = [
        Held {
            data: vec![(0, 4096, old)],
            records: vec![marker.clone()],
            ..Held::default()
        },
        Held {
            records: vec![record.clone()],
            ..Held::default()
        },
        Held {
            records: vec![marker, record],
            ..Held::default()
        },
    ];
    let mut base = vec![0; 2 * VOLUME_BYTES as usize];
    base[..4096].fill(9);
    let mut life3 = World::start(
        held,
        Start {
            degraded: false,
            base,
            refuse_data_deletes: Some(0),
            ..Start::default()
        },
    );
    assert_eq!(life3.c.stats().deletion_records_void, 1);
    assert_eq!(filled_with(&life3.read_block_0()), Some(9));
    life3.write_block_0(5);
    life3.run_until(life3.now + 20_000_000);
    let World { held, base, .. } = life3;
    let mut life4 = World::start(
        held,
        Start {
            generation: 3,
            degraded: false,
            base,
            silent: Some(2),
            ..Start::default()
        },
    );
    assert_eq!(
        filled_with(&life4.read_block_0()),
        Some(5),
        "life 4 read something older than the acknowledged write: {}",
        life4.c.describe()
    );
}
