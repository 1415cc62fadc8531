use super::*;

mod bound;
mod copies;
mod full;
mod lives;
mod local;
mod reads;
mod reclaim_base;
mod reclaim_load;
mod seal;
mod stale;

/// A formatted client with one store, its superblock written; ready.
fn ready(policy: Policy) -> Client {
    let mut config = Config::new(7, 1, 1 << 20);
    config.policy = policy;
    let mut c = Client::format(config, vec![StoreInfo { id: 1, server: 1 }], 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("the superblock is written first");
    };
    c.handle_base(1, BaseDone::Written { id });
    assert!(c.is_ready());
    c
}

fn write(c: &mut Client, up_id: u64, offset_bytes: u64) {
    c.handle_upward(
        2,
        up_id,
        Upward::Write {
            offset_bytes,
            data: vec![up_id as u8; 4096],
            durable: false,
        },
    );
}

/// One step of a test's event loop after the store requests are answered: every base write
/// done, the clock moved to the client's next deadline (at least 1 ns on, at most `until`, 100 ns
/// on when it has none) and the timeout handled.
fn base_writes_done_and_next_timeout(c: &mut Client, now: &mut Nanos, until: Nanos) {
    while let Some(op) = c.poll_base() {
        if let BaseOp::Write { id, .. } = op {
            c.handle_base(*now, BaseDone::Written { id });
        }
    }
    *now = c
        .poll_timeout()
        .unwrap_or(*now + 100)
        .clamp(*now + 1, until);
    c.handle_timeout(*now);
}

/// The store's answer to the one write request waiting.
/// (Reclaim requests before it — full stores are reclaimed under load — stay unanswered.)
fn answer(c: &mut Client, reply: Reply) {
    let (store, id, request) = std::iter::from_fn(|| c.poll_store())
        .find(|(_, _, r)| !matches!(r, Request::ReadAny { .. } | Request::Read { .. }))
        .expect("a store request");
    assert!(matches!(request, Request::Write { .. }), "{request:?}");
    c.handle_store(3, store, id, reply, Some(0));
}

/// A volume formatted without stores (a plain volume) writes to the base volume under any
/// policy, reads from it, and restarts without waiting for anything.
#[test]
fn a_client_without_stores_is_a_plain_volume() {
    for policy in [Policy::Peak, Policy::Always, Policy::Baseline] {
        let mut config = Config::new(7, 1, 1 << 20);
        config.policy = policy;
        config.t_base = 0;
        let mut c = Client::format(config.clone(), Vec::new(), 0);
        let Some(BaseOp::Write {
            id,
            data: superblock,
            ..
        }) = c.poll_base()
        else {
            panic!("the superblock is written first");
        };
        c.handle_base(1, BaseDone::Written { id });
        assert!(c.is_ready());
        write(&mut c, 1, 8192);
        assert!(c.poll_store().is_none(), "no store to off-load to");
        let Some(BaseOp::Write {
            id, offset_bytes, ..
        }) = c.poll_base()
        else {
            panic!("the write goes to the base volume");
        };
        assert_eq!(offset_bytes, 8192);
        c.handle_base(2, BaseDone::Written { id });
        assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
        assert!(c.is_quiescent());

        // A restart reads the (empty) store set and serves at once.
        let mut r = Client::recover(config, 10);
        let Some(BaseOp::Read { id, .. }) = r.poll_base() else {
            panic!("the superblock is read first");
        };
        r.handle_base(
            11,
            BaseDone::Read {
                id,
                data: superblock,
            },
        );
        while let Some(op) = r.poll_base() {
            if let BaseOp::Write { id, .. } = op {
                r.handle_base(12, BaseDone::Written { id });
            }
        }
        assert!(r.poll_store().is_none());
        assert!(r.is_ready(), "{policy:?}: {:?}", r.recovery_wait());
    }
}

/// A store whose log was damaged answers a read with an older copy (or none) of a range it
/// acknowledged: the read is served from the other copy, never from the older one, and the
/// damaged store is dropped from the range's holders.
#[test]
fn a_store_that_lost_an_acknowledged_copy_is_read_around() {
    let mut config = Config::new(7, 1, 1 << 20);
    config.policy = Policy::Always;
    config.n_way = 2;
    let stores = vec![
        StoreInfo { id: 1, server: 1 },
        StoreInfo { id: 2, server: 2 },
    ];
    let mut c = Client::format(config, stores, 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("the superblock is written first");
    };
    c.handle_base(1, BaseDone::Written { id });
    for (up_id, fill) in [(1, 1u8), (2, 2u8)] {
        c.handle_upward(
            2,
            up_id,
            Upward::Write {
                offset_bytes: 0,
                data: vec![fill; 4096],
                durable: false,
            },
        );
        let sent: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
        assert_eq!(sent.len(), 2, "{sent:?}");
        for (store, id, _) in sent {
            c.handle_store(3, store, id, Reply::Done, Some(0));
        }
        assert_eq!(c.poll_upward(), Some((up_id, UpReply::Written)));
    }
    let current = c.ranges().next().expect("off-loaded").2.version;
    for (round, bad) in [Some(current - 1), None].into_iter().enumerate() {
        // After the first loss the range, down to one copy, is reclaimed (under any policy):
        // that read stays unanswered here.
        let reclaims: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
        assert_eq!(reclaims.len(), round, "{reclaims:?}");
        assert!(reclaims.iter().all(|(_, _, r)| matches!(
            r,
            Request::Read {
                offset_bytes: 0,
                length_bytes: 4096,
                ..
            }
        )));
        c.handle_upward(
            4,
            9,
            Upward::Read {
                offset_bytes: 0,
                length_bytes: 4096,
            },
        );
        let (store, id, _) = c.poll_store().expect("a read");
        let pieces = bad.map_or(Vec::new(), |version| {
            let e = Extent {
                volume: 1,
                offset_bytes: 0,
                length_bytes: 4096,
                version,
            };
            vec![(e, vec![1u8; 4096])]
        });
        c.handle_store(5, store, id, Reply::Read(pieces), Some(0));
        let (other, id, request) = c.poll_store().expect("read again elsewhere");
        assert_ne!(other, store, "{request:?}");
        let e = Extent {
            volume: 1,
            offset_bytes: 0,
            length_bytes: 4096,
            version: current,
        };
        c.handle_store(
            6,
            other,
            id,
            Reply::Read(vec![(e, vec![2u8; 4096])]),
            Some(0),
        );
        assert_eq!(c.poll_upward(), Some((9, UpReply::Read(vec![2u8; 4096]))));
        assert_eq!(
            c.ranges().next().expect("still off-loaded").2.stores,
            bit(other)
        );
        // The next damage is found on the remaining holder: start over with both.
        c.map
            .update(0, 4096, |_, _, o| o.map(|l| Loc { stores: 0b11, ..*l }));
    }
    assert_eq!(c.stats().lost_copies, 2);
    assert_eq!(c.stats().lost_bytes, 0);
}

/// A client in Sierra's logging mode over three stores on three racks (`server` = rack), formatted
/// and ready.
fn logging_client() -> Client {
    let mut config = Config::new(7, 1, 1 << 20);
    config.policy = Policy::WhileBaseUnavailable;
    config.n_way = 2;
    let stores = (1..=3).map(|id| StoreInfo { id, server: id }).collect();
    let mut c = Client::format(config, stores, 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("the superblock is written first");
    };
    c.handle_base(1, BaseDone::Written { id });
    assert!(c.is_ready());
    c
}

/// Writes go to the base while every replica is available, to N stores of distinct racks while
/// one is not (preferring stores of the better locality class), and are reclaimed to the base
/// once all are available again.
#[test]
fn logging_mode_off_loads_while_a_replica_is_down_and_reclaims_after() {
    let mut c = logging_client();
    write(&mut c, 1, 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("with every replica up the write goes to the base");
    };
    c.handle_base(2, BaseDone::Written { id });
    assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));

    // Store 3 is in the best locality class, store 2 next: they take the copies.
    c.set_store_ranks([(1, 2), (2, 1), (3, 0)]);
    c.set_base_available(3, false);
    write(&mut c, 2, 8192);
    assert!(
        c.poll_base().is_none(),
        "not to the base while a replica is down"
    );
    let mut sent = Vec::new();
    while let Some((store, id, request)) = c.poll_store() {
        assert!(matches!(request, Request::Write { .. }), "{request:?}");
        sent.push((store, id));
    }
    let mut chosen: Vec<u64> = sent.iter().map(|&(s, _)| c.stores[s].info.id).collect();
    chosen.sort_unstable();
    assert_eq!(chosen, vec![2, 3]);
    for (store, id) in sent {
        c.handle_store(4, store, id, Reply::Done, Some(0));
    }
    assert_eq!(c.poll_upward(), Some((2, UpReply::Written)));
    assert_eq!(c.stats().offloaded_writes, 1);
    // No reclaim while the replica is down.
    c.handle_timeout(5_000_000_000);
    assert!(c.poll_store().is_none());

    c.set_base_available(6_000_000_000, true);
    let (_, _, loc) = c.ranges().next().expect("off-loaded");
    let (version, holders) = (loc.version, loc.stores);
    let mut now = 7_000_000_000;
    let mut asked = Vec::new();
    let reclaimed = loop {
        if let Some(op) = c.poll_base() {
            break op;
        }
        assert!(
            asked.len() < 10,
            "reclaim never wrote to the base: asked {asked:?}"
        );
        let Some((store, id, request)) = c.poll_store() else {
            now += 1_000_000_000;
            c.handle_timeout(now);
            asked.push(usize::MAX);
            continue;
        };
        asked.push(store);
        assert!(matches!(request, Request::ReadAny { .. }), "{request:?}");
        let piece = (holders & bit(store) != 0).then(|| {
            let extent = Extent {
                volume: 1,
                offset_bytes: 8192,
                length_bytes: 4096,
                version,
            };
            (extent, vec![2u8; 4096])
        });
        now += 1_000;
        c.handle_store(now, store, id, Reply::ReadAny(piece), Some(0));
    };
    let BaseOp::Write {
        offset_bytes, data, ..
    } = reclaimed
    else {
        panic!("the off-loaded write is reclaimed to the base: {reclaimed:?}");
    };
    assert_eq!((offset_bytes, data), (8192, vec![2u8; 4096]));
}

/// A base write that a replica did not take comes back with its data and is off-loaded under a
/// version the range map then serves; a reclaim write that fails leaves its range off-loaded.
#[test]
fn a_failed_base_write_is_off_loaded() {
    let mut c = logging_client();
    write(&mut c, 1, 4096);
    let Some(BaseOp::Write { id, data, .. }) = c.poll_base() else {
        panic!("with every replica up the write goes to the base");
    };
    c.set_base_available(2, false);
    c.handle_base(3, BaseDone::Failed { id, data });
    assert_eq!(c.stats().base_writes_failed, 1);
    let mut sent = 0;
    while let Some((store, id, request)) = c.poll_store() {
        let Request::Write { offset_bytes, .. } = request else {
            panic!("{request:?}");
        };
        assert_eq!(offset_bytes, 4096);
        c.handle_store(4, store, id, Reply::Done, Some(0));
        sent += 1;
    }
    assert_eq!(sent, 2, "N copies");
    assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
    let (start, end, loc) = c.ranges().next().expect("in the range map");
    assert_eq!((start, end, loc.on_base), (4096, 8192, false));
}

/// Peak off-load with N-way copies needs N lightly loaded stores on different servers (Everest
/// §4.2, Figure 12: with 2-way off-load and one idle store beside a busy one, "no off-loading
/// occurs"); with one, writes stay on the base volume. 1-way off-loads to the idle one.
#[test]
fn a_peak_off_loads_only_when_n_stores_are_lightly_loaded() {
    for n_way in [1usize, 2] {
        let mut config = Config::new(7, 1, 1 << 20);
        config.policy = Policy::Peak;
        config.n_way = n_way;
        config.t_base = 4;
        config.t_store = 32;
        let stores = vec![
            StoreInfo { id: 1, server: 1 },
            StoreInfo { id: 2, server: 2 },
        ];
        let mut c = Client::format(config, stores, 0);
        let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
            panic!("the superblock is written first");
        };
        c.handle_base(1, BaseDone::Written { id });
        assert!(c.is_ready());
        // The base volume is in a peak; store 2 is as busy as it.
        c.set_external_base_load(40);
        c.handle_load(0, 0);
        c.handle_load(1, 50);
        write(&mut c, 1, 0);
        let sent: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
        if n_way == 1 {
            assert_eq!(sent.len(), 1);
            assert_eq!(sent[0].0, 0, "to the idle store");
            assert!(c.poll_base().is_none());
        } else {
            assert!(
                sent.is_empty(),
                "2-way finds one light store: {} sent",
                sent.len()
            );
            assert!(matches!(c.poll_base(), Some(BaseOp::Write { .. })));
            // Both stores light: the next write is off-loaded to both.
            c.handle_load(1, 0);
            write(&mut c, 2, 8192);
            let sent: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
            assert_eq!(sent.len(), 2, "{sent:?}");
        }
    }
}

/// A store answering `fenced` (a newer incarnation of this client recovered from it) deposes
/// the client: the writes it had in flight, on the stores and on the base, fail with
/// `Fenced`, later requests too, nothing more is sent, and late answers change nothing.
#[test]
fn a_fenced_client_fails_what_it_holds_and_serves_nothing_more() {
    let mut c = ready(Policy::Always);
    write(&mut c, 1, 0);
    write(&mut c, 2, 8192);
    let sent: Vec<(StoreIdx, u64, Request)> = std::iter::from_fn(|| c.poll_store()).collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    c.set_policy(Policy::Baseline);
    write(&mut c, 3, 65536);
    let Some(BaseOp::Write { id: base_id, .. }) = c.poll_base() else {
        panic!("a baseline write goes to the base volume");
    };
    let (store, id, _) = &sent[0];
    c.handle_store(3, *store, *id, Reply::Error(StoreError::Fenced), Some(0));
    let mut failed: Vec<(u64, UpReply)> = std::iter::from_fn(|| c.poll_upward()).collect();
    failed.sort_by_key(|(id, _)| *id);
    assert_eq!(
        failed,
        (1..=3)
            .map(|id| (id, UpReply::Error(ClientError::Fenced)))
            .collect::<Vec<_>>()
    );
    assert_eq!(c.failure(), Some(ClientError::Fenced));
    assert_eq!(c.stats().fenced, 1);
    // Late answers are ignored; new requests fail at once; nothing is sent.
    let (store, id, _) = &sent[1];
    c.handle_store(4, *store, *id, Reply::Done, Some(0));
    c.handle_base(5, BaseDone::Written { id: base_id });
    write(&mut c, 4, 0);
    assert_eq!(
        c.poll_upward(),
        Some((4, UpReply::Error(ClientError::Fenced)))
    );
    assert_eq!(c.poll_upward(), None);
    assert!(c.poll_store().is_none() && c.poll_base().is_none());
}

/// Under a policy that never reclaims (`Always`, as `Baseline` after a policy change), a
/// write left with fewer than N copies is still reclaimed to the base volume, and the
/// superblock's "degraded" mark clears once it is there: restarts stop waiting for every store.
#[test]
fn a_degraded_mark_clears_under_a_policy_that_never_reclaims() {
    let mut config = Config::new(7, 1, 1 << 20);
    config.policy = Policy::Always;
    config.n_way = 2;
    let stores = vec![
        StoreInfo { id: 1, server: 1 },
        StoreInfo { id: 2, server: 2 },
    ];
    let mut c = Client::format(config.clone(), stores, 0);
    // Store 0 keeps what it is sent; store 1 refuses every write (full).
    let mut kept: BTreeMap<u64, (u64, Vec<u8>)> = BTreeMap::new();
    let mut base: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut degraded_marks = Vec::new();
    let mut answers = Vec::new();
    let mut now = 1;
    // The first reclaim read fails: it is queued again (it was dropped, and the mark stayed).
    let mut failed_reads = 0;
    write(&mut c, 1, 8192);
    while now < 10 * config.copies_timeout_ns {
        // Everything the client asks now is answered now: no time passes in between.
        let mut progress = true;
        while std::mem::take(&mut progress) {
            while let Some((store, id, request)) = c.poll_store() {
                progress = true;
                let extent = |offset_bytes: u64, version: u64, len: usize| Extent {
                    volume: 1,
                    offset_bytes,
                    length_bytes: len as u64,
                    version,
                };
                let reply = match request {
                    Request::Write { .. } if store == 1 => Reply::Error(StoreError::Full),
                    Request::Write {
                        offset_bytes,
                        version,
                        data,
                        ..
                    } => {
                        kept.insert(offset_bytes, (version, data));
                        Reply::Done
                    }
                    Request::Read { .. } if failed_reads == 0 => {
                        failed_reads += 1;
                        Reply::Error(StoreError::Recovering)
                    }
                    Request::Read {
                        offset_bytes,
                        length_bytes,
                        ..
                    } => Reply::Read(
                        kept.range(offset_bytes..offset_bytes + length_bytes)
                            .map(|(&o, (v, d))| (extent(o, *v, d.len()), d.clone()))
                            .collect(),
                    ),
                    Request::ReadAny { .. } => Reply::ReadAny(
                        kept.iter()
                            .next()
                            .map(|(&o, (v, d))| (extent(o, *v, d.len()), d.clone())),
                    ),
                    Request::Delete {
                        offset_bytes,
                        length_bytes,
                        version,
                        ..
                    } => {
                        kept.retain(|&o, (v, _)| {
                            !(o >= offset_bytes && o < offset_bytes + length_bytes && *v <= version)
                        });
                        Reply::Done
                    }
                    Request::Metadata { .. } => Reply::Metadata(Vec::new()),
                };
                c.handle_store(now, store, id, reply, Some(0));
            }
            while let Some(op) = c.poll_base() {
                progress = true;
                match op {
                    BaseOp::Write {
                        id,
                        offset_bytes,
                        data,
                        ..
                    } => {
                        if offset_bytes == config.usable_bytes() {
                            degraded_marks
                                .push(Superblock::decode(&data).expect("superblock").degraded);
                        } else {
                            base.insert(offset_bytes, data);
                        }
                        c.handle_base(now, BaseDone::Written { id });
                    }
                    BaseOp::Read { id, .. } => panic!("no base read expected (op {id})"),
                    other => panic!("no local copies without local_copy: {other:?}"),
                }
            }
        }
        answers.extend(std::iter::from_fn(|| c.poll_upward()));
        now = c.poll_timeout().unwrap_or(now + 1_000_000).max(now + 1);
        c.handle_timeout(now);
    }
    assert_eq!(
        answers,
        vec![(1, UpReply::Error(ClientError::TooFewCopies))]
    );
    // Format (clean), then degraded, then clean again once the lone copy is on the base.
    assert_eq!(degraded_marks, vec![false, true, false], "{}", c.describe());
    assert_eq!(
        base.get(&8192),
        Some(&vec![1u8; 4096]),
        "reclaimed to the base"
    );
    assert!(
        c.stats().reclaim_reads > 1,
        "the failed reclaim read was retried"
    );
    assert_eq!(failed_reads, 1);
}

/// The base volume's device failing operations fails just those: a write and a read are
/// answered with the error and the next ones are served; a failed superblock write is written
/// again a probe interval later (a format becomes ready only then).
#[test]
fn a_base_device_error_fails_only_its_own_request() {
    let config = Config::new(7, 1, 1 << 20);
    let mut c = Client::format(config.clone(), Vec::new(), 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("the superblock is written first");
    };
    c.handle_base(
        1,
        BaseDone::Error {
            id,
            no_space: false,
        },
    );
    assert!(
        !c.is_ready(),
        "not ready before the superblock is on the base"
    );
    assert!(c.poll_base().is_none(), "not written again at once");
    let again = c.poll_timeout().expect("a retry");
    assert_eq!(again, 1 + config.probe_interval_ns);
    c.handle_timeout(again);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("the superblock is written again");
    };
    c.handle_base(again, BaseDone::Written { id });
    assert!(c.is_ready());
    assert_eq!(c.stats().base_errors, 1);

    let now = again + 1;
    for (up_id, no_space) in [(1, true), (2, false)] {
        write(&mut c, up_id, 8192 * up_id);
        let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
            panic!("a plain volume writes to the base");
        };
        c.handle_base(now, BaseDone::Error { id, no_space });
        assert_eq!(
            c.poll_upward(),
            Some((up_id, UpReply::Error(ClientError::Base { no_space })))
        );
    }
    c.handle_upward(
        now,
        3,
        Upward::Read {
            offset_bytes: 0,
            length_bytes: 4096,
        },
    );
    let Some(BaseOp::Read { id, .. }) = c.poll_base() else {
        panic!("a read of the base");
    };
    c.handle_base(
        now,
        BaseDone::Error {
            id,
            no_space: false,
        },
    );
    assert_eq!(
        c.poll_upward(),
        Some((3, UpReply::Error(ClientError::Base { no_space: false })))
    );
    // The next requests are served.
    write(&mut c, 4, 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("a write");
    };
    c.handle_base(now, BaseDone::Written { id });
    assert_eq!(c.poll_upward(), Some((4, UpReply::Written)));
    assert_eq!(c.stats().base_errors, 4);
    assert!(c.failure().is_none());
}

/// A logger holding a copy dies; once the data is reclaimed, the dead logger's copy is covered
/// by a deletion record on N other loggers, and the data leaves the log (`offloaded_bytes`,
/// Sierra's logged bytes) without waiting for the dead logger to return.
#[test]
fn reclaimed_data_leaves_the_log_without_waiting_for_a_dead_logger() {
    let mut c = logging_client();
    // Three loggers, N = 2: the dead one's record goes to the other two.
    c.set_base_available(2, false);
    write(&mut c, 1, 8192);
    let sent: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
    assert_eq!(sent.len(), 2);
    for &(store, id, _) in &sent {
        c.handle_store(3, store, id, Reply::Done, Some(0));
    }
    assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
    let (_, _, loc) = c.ranges().next().expect("logged");
    let (version, holders) = (loc.version, loc.stores);
    let dead = indices(holders).next().expect("a holder");
    c.connection_lost(4, dead);
    c.set_base_available(5, true);
    let mut now = 6;
    let mut kept: BTreeMap<(StoreIdx, u64), u64> = BTreeMap::new();
    for (s, _, _) in &sent {
        kept.insert((*s, 8192), version);
    }
    for _ in 0..10_000 {
        let mut progress = false;
        while let Some((store, id, request)) = c.poll_store() {
            progress = true;
            assert_ne!(store, dead, "nothing is sent to the dead logger but probes");
            let reply = match request {
                Request::Read { client, .. } if client == PROBE_CLIENT => continue,
                Request::Read { .. } | Request::ReadAny { .. }
                    if kept.contains_key(&(store, 8192)) =>
                {
                    let e = Extent {
                        volume: 1,
                        offset_bytes: 8192,
                        length_bytes: 4096,
                        version,
                    };
                    let piece = (e, vec![1u8; 4096]);
                    match request {
                        Request::ReadAny { .. } => Reply::ReadAny(Some(piece)),
                        _ => Reply::Read(vec![piece]),
                    }
                }
                Request::Read { .. } => Reply::Read(Vec::new()),
                Request::ReadAny { .. } => Reply::ReadAny(None),
                Request::Delete { client: 7, .. } => {
                    kept.remove(&(store, 8192));
                    Reply::Done
                }
                _ => Reply::Done,
            };
            c.handle_store(now, store, id, reply, Some(0));
        }
        while let Some(op) = c.poll_base() {
            progress = true;
            if let BaseOp::Write { id, .. } = op {
                c.handle_base(now, BaseDone::Written { id });
            }
        }
        if c.stats().offloaded_bytes == 0 {
            break;
        }
        if !progress {
            now = c.poll_timeout().unwrap_or(now + 1_000_000).max(now + 1);
            c.handle_timeout(now);
        }
    }
    assert_eq!(
        c.stats().offloaded_bytes,
        0,
        "still logged while the dead logger is away: {}",
        c.describe()
    );
    assert!(c.stats().deletion_records_written > 0);
    assert!(!c.stores[dead].up, "the dead logger never came back");
}
