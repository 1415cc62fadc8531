//! Sierra §3.6: local copies of logged writes, driven by hand — the base volume (the primary's
//! replica) completes its writes in whatever order a test picks, as a disk may.

use super::*;

/// A logging client with local copies, every replica down (writes are logged), and the
/// stores' copies it has been sent: (store, request id, offset, version, bytes).
struct Rig {
    c: Client,
    /// The local replica's bytes, written as the test completes base writes.
    disk: BTreeMap<u64, Vec<u8>>,
    now: Nanos,
}

impl Rig {
    fn new() -> Rig {
        let mut config = Config::new(7, 1, 1 << 20);
        config.policy = Policy::WhileBaseUnavailable;
        config.n_way = 2;
        config.local_copy = true;
        let stores = (1..=3).map(|id| StoreInfo { id, server: id }).collect();
        let mut c = Client::format(config, stores, 0);
        let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
            panic!("the superblock is written first");
        };
        c.handle_base(1, BaseDone::Written { id });
        c.set_base_available(2, false);
        Rig {
            c,
            disk: BTreeMap::new(),
            now: 3,
        }
    }

    fn tick(&mut self) -> Nanos {
        self.now += 1_000;
        self.now
    }

    /// An upper-layer write of 4 KiB of `byte` at 8192: every store copy it is sent is
    /// answered done; returns its local copy, not completed.
    fn logged_write(&mut self, up_id: u64, byte: u8) -> (u64, Vec<u8>) {
        let now = self.tick();
        self.c.handle_upward(
            now,
            up_id,
            Upward::Write {
                offset_bytes: 8192,
                data: vec![byte; 4096],
                durable: false,
            },
        );
        assert!(
            self.c.poll_base().is_none(),
            "no local copy before the write has its copies"
        );
        let sent: Vec<(StoreIdx, u64, Request)> = std::iter::from_fn(|| self.c.poll_store())
            .filter(|(_, _, r)| matches!(r, Request::Write { .. }))
            .collect();
        assert_eq!(sent.len(), 2, "two copies on the stores");
        for (store, id, _) in sent {
            let now = self.tick();
            self.c.handle_store(now, store, id, Reply::Done, Some(0));
        }
        assert_eq!(self.c.poll_upward(), Some((up_id, UpReply::Written)));
        match self.c.poll_base() {
            Some(BaseOp::WriteLocal {
                id,
                offset_bytes: 8192,
                data,
            }) => (id, data),
            other => panic!("a logged write is copied to the local replica: {other:?}"),
        }
    }

    /// Completes base write `id` carrying `data` at 8192: the local replica holds it now.
    fn land(&mut self, id: u64, data: Vec<u8>) {
        self.disk.insert(8192, data);
        let now = self.tick();
        self.c.handle_base(now, BaseDone::Written { id });
    }

    /// Every replica available again: the off-loaded range is offered by the stores holding
    /// it (4 KiB of `byte`) until reclaim issues its base write, which is returned.
    fn reclaim(&mut self, byte: u8) -> BaseOp {
        let now = self.tick();
        self.c.set_base_available(now, true);
        let loc = *self.c.ranges().next().expect("off-loaded").2;
        loop {
            if let Some(op) = self.c.poll_base() {
                return op;
            }
            let Some((store, id, request)) = self.c.poll_store() else {
                self.now += 1_000_000_000;
                let now = self.now;
                self.c.handle_timeout(now);
                continue;
            };
            assert!(matches!(request, Request::ReadAny { .. }), "{request:?}");
            let piece = (loc.stores & bit(store) != 0).then(|| {
                let extent = Extent {
                    volume: 1,
                    offset_bytes: 8192,
                    length_bytes: 4096,
                    version: loc.version,
                };
                (extent, vec![byte; 4096])
            });
            let now = self.tick();
            self.c
                .handle_store(now, store, id, Reply::ReadAny(piece), Some(0));
        }
    }

    /// Writes `byte` over the rig's block as upward request `up_id`, answering the client's
    /// store requests with `reply` and handing its base operations to `base`, until the write
    /// is answered (within four copies' timeouts); then hands `base` what follows the answer.
    fn write_until_answered(
        &mut self,
        up_id: u64,
        byte: u8,
        mut reply: impl FnMut(StoreIdx, &Request) -> Reply,
        mut base: impl FnMut(BaseOp),
    ) -> UpReply {
        let now = self.tick();
        self.c.handle_upward(
            now,
            up_id,
            Upward::Write {
                offset_bytes: 8192,
                data: vec![byte; 4096],
                durable: false,
            },
        );
        let until = self.now + 4 * self.c.config.copies_timeout_ns;
        loop {
            while let Some(op) = self.c.poll_base() {
                base(op);
            }
            while let Some((store, id, request)) = self.c.poll_store() {
                let answer = reply(store, &request);
                let now = self.tick();
                self.c.handle_store(now, store, id, answer, Some(0));
            }
            if let Some((id, answer)) = self.c.poll_upward() {
                assert_eq!(id, up_id, "another request answered");
                while let Some(op) = self.c.poll_base() {
                    base(op);
                }
                return answer;
            }
            assert!(self.now < until, "the write is never answered");
            self.now = self
                .c
                .poll_timeout()
                .unwrap_or(self.now + 1)
                .max(self.now + 1);
            let now = self.now;
            self.c.handle_timeout(now);
        }
    }

    /// Reads 4 KiB at 8192; a store read is answered with the latest version's bytes
    /// (`latest`), a base read with the local replica's.
    fn read(&mut self, up_id: u64, latest: u8) -> (Vec<u8>, bool) {
        let now = self.tick();
        self.c.handle_upward(
            now,
            up_id,
            Upward::Read {
                offset_bytes: 8192,
                length_bytes: 4096,
            },
        );
        let mut local = false;
        while let Some(op) = self.c.poll_base() {
            let BaseOp::Read { id, .. } = op else {
                panic!("only the read goes to the base: {op:?}");
            };
            local = true;
            let data = self.disk.get(&8192).cloned().unwrap_or(vec![0; 4096]);
            let now = self.tick();
            self.c.handle_base(now, BaseDone::Read { id, data });
        }
        let reads: Vec<(StoreIdx, u64, Request)> = std::iter::from_fn(|| self.c.poll_store())
            .filter(|(_, _, r)| matches!(r, Request::Read { .. }))
            .collect();
        for (store, id, _) in reads {
            let (_, _, loc) = self.c.ranges().next().expect("off-loaded");
            let extent = Extent {
                volume: 1,
                offset_bytes: 8192,
                length_bytes: 4096,
                version: loc.version,
            };
            let now = self.tick();
            self.c.handle_store(
                now,
                store,
                id,
                Reply::Read(vec![(extent, vec![latest; 4096])]),
                Some(0),
            );
        }
        match self.c.poll_upward() {
            Some((id, UpReply::Read(data))) if id == up_id => (data, local),
            other => panic!("read {up_id} answered: {other:?}"),
        }
    }
}

/// A logged write's local copy, once done, serves reads of it from the local replica, and its
/// reclaim writes the other replicas only.
#[test]
fn a_local_copy_serves_reads_and_is_not_reclaimed_to_itself() {
    let mut r = Rig::new();
    let (l1, data) = r.logged_write(1, 1);
    // Before the copy is done, reads go to the stores.
    assert_eq!(r.read(2, 1), (vec![1; 4096], false));
    r.land(l1, data);
    assert!(r.c.ranges().all(|(_, _, l)| l.local), "marked local");
    assert_eq!(r.read(3, 1), (vec![1; 4096], true));
    assert_eq!(r.c.stats().local_reads, 1);

    let op = r.reclaim(1);
    let BaseOp::Replicate {
        id,
        offset_bytes: 8192,
        data,
    } = op
    else {
        panic!("reclaim skips the local replica: {op:?}");
    };
    assert_eq!(data, vec![1u8; 4096]);
    let now = r.tick();
    r.c.handle_base(now, BaseDone::Written { id });
    assert_eq!(r.c.stats().reclaimed_bytes, 4096);
    assert_eq!(r.c.stats().reclaim_local_bytes, 4096);
}

/// Two writes over the same bytes of the local replica in flight at once may land in either
/// order: a local copy issued beside another never marks its range. Here the reclaim of
/// version 1 (written whole: its local copy was not done when it started) and the local copy
/// of version 2 are in flight together and land in the reverse order — the replica ends with
/// version 1's bytes — so a read after version 2 is acknowledged must not come from it.
#[test]
fn a_local_copy_beside_another_write_there_does_not_mark() {
    let mut r = Rig::new();
    let (l1, data1) = r.logged_write(1, 1);
    // Every replica back: version 1 is reclaimed, read from a store and written whole (its
    // local copy is not done, so the local replica is not known to hold it).
    let (r1, reclaim_data) = match r.reclaim(1) {
        BaseOp::Write { id, data, .. } => (id, data),
        other => panic!("reclaim writes every replica: {other:?}"),
    };
    // Version 2 over the same bytes (they are off-loaded: it is logged and copied locally).
    let (l2, data2) = r.logged_write(2, 2);
    // The disk lands them out of order: both copies, then the reclaim of version 1.
    r.land(l1, data1);
    r.land(l2, data2);
    r.land(r1, reclaim_data);
    assert_eq!(
        r.disk[&8192],
        vec![1u8; 4096],
        "the replica holds version 1"
    );
    assert!(
        r.c.ranges().all(|(_, _, l)| !l.local),
        "nothing marked local: {:?}",
        r.c.ranges().collect::<Vec<_>>()
    );
    assert_eq!(
        r.read(3, 2),
        (vec![2; 4096], false),
        "version 2, from a store"
    );
    assert_eq!(r.c.stats().local_copies_unused, 2);
}

/// A logged write that no store takes fails, and its bytes never reach the local replica:
/// they would outlive the failure there, and a later life of this primary, which knows nothing
/// of the write, would serve them after reads had returned the older data (sierra-short seed
/// 7158457761728923922: a primary deposed by a stalled link, its log writes fenced, its local
/// copy landed, and back as primary it served the failed write).
#[test]
fn a_logged_write_no_store_takes_never_reaches_the_local_replica() {
    let mut r = Rig::new();
    let answer = r.write_until_answered(
        1,
        5,
        |_, request| match request {
            Request::Write { .. } => Reply::Error(StoreError::Full),
            _ => Reply::Read(Vec::new()),
        },
        |op| panic!("nothing goes to the local replica: {op:?}"),
    );
    assert!(matches!(answer, UpReply::Error(_)), "{answer:?}");
    assert!(r.c.poll_base().is_none());
    assert_eq!(r.c.stats().local_copies, 0);
}

/// A write answered with an error for want of copies enters the range map only once the
/// superblock's "degraded" mark is durable, which may be after a newer write over the same
/// bytes entered it and was copied to the local replica. The older write's bytes the newer one
/// superseded must not be copied there then: landing last, they would be what a read served by
/// the local replica returns (sierra seed 5929858340065061311: a read returned write 369 of a
/// block after an earlier read had returned the newer acknowledged write 384).
#[test]
fn a_write_finished_late_copies_nothing_a_newer_write_superseded() {
    let mut r = Rig::new();
    let sb_at = r.c.config.usable_bytes();
    // One store takes it, the others are full: answered with an error once the copies'
    // timeout runs out, and held until the "degraded" mark is durable.
    let mut took = None;
    let mut superblock = None;
    let answer = r.write_until_answered(
        1,
        1,
        |store, request| match request {
            Request::Write { .. } if took.is_none() || took == Some(store) => {
                took = Some(store);
                Reply::Done
            }
            Request::Write { .. } => Reply::Error(StoreError::Full),
            _ => Reply::Read(Vec::new()),
        },
        |op| match op {
            BaseOp::Write {
                id, offset_bytes, ..
            } if offset_bytes >= sb_at => superblock = Some(id),
            other => panic!(
                "only the superblock goes to the base: {:?}",
                other.written().map(|w| w.0)
            ),
        },
    );
    assert!(matches!(answer, UpReply::Error(_)), "{answer:?}");
    let superblock = superblock.expect("the degraded mark is being written");
    // A newer write of the same bytes gets its copies, enters the map and is copied locally.
    let (l2, data2) = r.logged_write(2, 2);
    r.land(l2, data2);
    assert!(
        r.c.ranges().all(|(_, _, l)| l.local),
        "version 2 is held locally"
    );
    // The mark is durable: the older write enters the map where nothing newer is (nowhere).
    let now = r.tick();
    r.c.handle_base(now, BaseDone::Written { id: superblock });
    while let Some(op) = r.c.poll_base() {
        match op {
            BaseOp::WriteLocal { id, data, .. } => r.land(id, data),
            BaseOp::Write {
                id, offset_bytes, ..
            } if offset_bytes >= sb_at => {
                let now = r.tick();
                r.c.handle_base(now, BaseDone::Written { id });
            }
            other => panic!("{:?}", other.written().map(|w| w.0)),
        }
    }
    assert_eq!(
        r.disk[&8192],
        vec![2u8; 4096],
        "the local replica holds version 2"
    );
    assert_eq!(
        r.read(4, 2).0,
        vec![2; 4096],
        "a read after it returns version 2"
    );
}
