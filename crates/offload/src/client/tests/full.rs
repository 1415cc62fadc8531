//! Full stores: which writes are refused and when (ENOSPC after the full timeout whatever the
//! reason), and reclaim that runs under load to make room.

use super::*;

#[test]
fn a_full_store_under_the_always_policy_refuses_only_writes_that_must_stay_off_loaded() {
    let mut c = ready(Policy::Always);
    write(&mut c, 1, 0);
    answer(&mut c, Reply::Done);
    assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));

    // The store is now full. A write over the off-loaded block cannot go to the base volume
    // (the store's older copy would shadow it after a restart), and is never retried into a
    // hang: it is refused.
    write(&mut c, 2, 0);
    answer(&mut c, Reply::Error(StoreError::Full));
    assert_eq!(
        c.poll_upward(),
        Some((2, UpReply::Error(ClientError::NoSpace)))
    );
    assert_eq!(c.stats().refused_writes, 1);
    // A write elsewhere falls back to the base volume.
    write(&mut c, 3, 65536);
    answer(&mut c, Reply::Error(StoreError::Full));
    let Some(BaseOp::Write {
        id, offset_bytes, ..
    }) = c.poll_base()
    else {
        panic!("the write goes to the base volume");
    };
    assert_eq!(offset_bytes, 65536);
    c.handle_base(4, BaseDone::Written { id });
    assert_eq!(c.poll_upward(), Some((3, UpReply::Written)));
    // The refused write changed nothing: the block still reads as the first write.
    c.handle_upward(
        5,
        4,
        Upward::Read {
            offset_bytes: 0,
            length_bytes: 4096,
        },
    );
    let (store, id, request) = c.poll_store().expect("read from the store");
    let Request::Read { .. } = request else {
        panic!("{request:?}");
    };
    let extent = Extent {
        volume: 1,
        offset_bytes: 0,
        length_bytes: 4096,
        version: match c.ranges().next() {
            Some((_, _, loc)) => loc.version,
            None => panic!("the block is off-loaded"),
        },
    };
    c.handle_store(
        6,
        store,
        id,
        Reply::Read(vec![(extent, vec![1u8; 4096])]),
        None,
    );
    assert_eq!(c.poll_upward(), Some((4, UpReply::Read(vec![1u8; 4096]))));
}

#[test]
fn full_stores_are_reclaimed_under_load_and_a_write_that_cannot_wait_gets_enospc() {
    let mut c = ready(Policy::Peak);
    c.set_external_base_load(1000); // loaded: no reclaim unless the stores are full
    write(&mut c, 1, 0);
    answer(&mut c, Reply::Done);
    assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
    assert!(c.stores_full_since().is_none());
    write(&mut c, 2, 0);
    answer(&mut c, Reply::Error(StoreError::Full));
    assert_eq!(c.stores_full_since(), Some(3));
    let (mut reclaim_requests, mut refused_at) = (0, None);
    let mut now = 3;
    while now < 20_000_000_000 && refused_at.is_none() {
        while let Some((store, id, request)) = c.poll_store() {
            let reply = match request {
                Request::Write { .. } => Reply::Error(StoreError::Full),
                Request::ReadAny { .. } => {
                    reclaim_requests += 1;
                    Reply::ReadAny(None)
                }
                Request::Read { .. } => {
                    reclaim_requests += 1;
                    Reply::Read(Vec::new())
                }
                other => panic!("{other:?}"),
            };
            c.handle_store(now, store, id, reply, Some(0));
        }
        if let Some(up) = c.poll_upward() {
            assert_eq!(up, (2, UpReply::Error(ClientError::NoSpace)));
            refused_at = Some(now);
        }
        now = c.poll_timeout().unwrap_or(now + 100_000_000).max(now + 1);
        c.handle_timeout(now);
    }
    assert!(
        reclaim_requests > 0,
        "reclaim runs under load when the stores are full"
    );
    let refused_at = refused_at.expect("the write is answered ENOSPC");
    assert!(
        (5_000_000_000..6_000_000_000).contains(&refused_at),
        "answered at {refused_at} ns"
    );
    assert_eq!(c.stats().refused_writes, 1);
}

#[test]
fn a_full_store_under_the_peak_policy_parks_the_write_until_a_retry() {
    let mut c = ready(Policy::Peak);
    c.set_external_base_load(1000); // loaded: writes are off-loaded
    write(&mut c, 1, 0);
    answer(&mut c, Reply::Done);
    assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
    write(&mut c, 2, 0);
    answer(&mut c, Reply::Error(StoreError::Full));
    assert_eq!(
        c.poll_upward(),
        None,
        "parked, not refused: reclaim makes room"
    );
    let retry = c.poll_timeout().expect("a retry is scheduled");
    c.handle_timeout(retry);
    answer(&mut c, Reply::Done);
    assert_eq!(c.poll_upward(), Some((2, UpReply::Written)));
}

/// A write that must stay off-loaded and that a store holds without answering (its cleaning
/// frees too little) is answered ENOSPC `full_timeout_ns` after it arrived, not whenever the
/// store gets to it; the store's later answer ends it quietly. With no store up at all, the
/// same bound holds.
#[test]
fn a_write_no_store_takes_in_time_is_answered_enospc_whatever_the_reason() {
    let mut config = Config::new(7, 1, 1 << 20);
    config.policy = Policy::Always;
    config.request_timeout_ns = None;
    config.full_timeout_ns = 1_000_000_000;
    let mut c = Client::format(config.clone(), vec![StoreInfo { id: 1, server: 1 }], 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("the superblock is written first");
    };
    c.handle_base(1, BaseDone::Written { id });
    write(&mut c, 1, 0);
    answer(&mut c, Reply::Done);
    assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));

    // The next write over block 0 must be off-loaded; the store holds it.
    c.handle_upward(
        10,
        2,
        Upward::Write {
            offset_bytes: 0,
            data: vec![2; 4096],
            durable: false,
        },
    );
    let (store, held, request) = c.poll_store().expect("the write is sent");
    assert!(matches!(request, Request::Write { .. }));
    assert_eq!(c.poll_timeout(), Some(10 + config.full_timeout_ns));
    c.handle_timeout(10 + config.full_timeout_ns - 1);
    assert_eq!(c.poll_upward(), None, "not before the timeout");
    c.handle_timeout(10 + config.full_timeout_ns);
    assert_eq!(
        c.poll_upward(),
        Some((2, UpReply::Error(ClientError::NoSpace)))
    );
    assert_eq!((c.stats().refused_writes, c.stats().late_writes), (1, 1));
    assert!(
        c.stores_full_since().is_some(),
        "a store holding a write counts as full"
    );
    // The store takes it at last: it ends quietly (its outcome was unknown), in the map.
    c.handle_store(2_000_000_000, store, held, Reply::Done, Some(0));
    assert_eq!(c.poll_upward(), None);
    assert!(c.stores_full_since().is_none());
    assert!(c.writes_in_flight().is_empty(), "{}", c.describe());
    let version = c.ranges().next().expect("off-loaded").2.version;
    let Request::Write { version: sent, .. } = request else {
        unreachable!()
    };
    assert_eq!(version, sent);

    // The store goes away: a write that must stay off-loaded is parked, then answered.
    c.connection_lost(3_000_000_000, store);
    c.handle_upward(
        3_000_000_001,
        3,
        Upward::Write {
            offset_bytes: 0,
            data: vec![3; 4096],
            durable: false,
        },
    );
    let mut now = 3_000_000_001;
    while now < 3_000_000_001 + config.full_timeout_ns {
        assert_eq!(c.poll_upward(), None);
        while let Some((_, id, _)) = c.poll_store() {
            c.handle_store(
                now,
                store,
                id,
                Reply::Error(StoreError::Recovering),
                Some(0),
            );
        }
        now = c.poll_timeout().expect("a timer").max(now + 1);
        c.handle_timeout(now);
    }
    assert_eq!(
        c.poll_upward(),
        Some((3, UpReply::Error(ClientError::NoSpace)))
    );
    assert_eq!(c.stats().late_writes, 2);
}
