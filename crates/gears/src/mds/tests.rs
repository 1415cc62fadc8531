//! The MDS's protocol steps, each driven by hand.

use super::*;
use crate::layout::LayoutSpec;
use crate::model::Topology;

pub(super) const S: Nanos = 1_000_000_000;

/// 6 servers in 3 racks, power-aware rack-aligned: gear group k is rack k.
pub(super) fn mds() -> Mds {
    let topology = Topology::racks(3, 2);
    let spec = LayoutSpec {
        kind: LayoutKind::PowerAware,
        racks: RackPolicy::Aligned,
        replicas: 3,
    };
    let layout = Layout::generate(spec, &topology, 24, &mut SplitMix64(3)).unwrap();
    Mds::new(MdsConfig::new(1 << 20), &layout, 0)
}

pub(super) fn drain(m: &mut Mds) -> Vec<(Endpoint, Message)> {
    std::iter::from_fn(|| m.poll_message()).collect()
}

/// A heartbeat from a server serving exactly what the MDS assigned it.
pub(super) fn heartbeat(
    m: &mut Mds,
    now: Nanos,
    s: ServerId,
    incarnation: u64,
) -> Vec<(Endpoint, Message)> {
    let primaries = (0..m.group_count() as u32)
        .map(|g| m.view(GroupId(g)))
        .filter(|v| v.primary == Some(s))
        .map(|v| (v.group, v.epoch))
        .collect();
    m.handle_message(
        now,
        Endpoint::Server(s),
        Message::Heartbeat {
            server: s,
            incarnation,
            sent_at: now,
            primaries,
            log_full: Vec::new(),
        },
    );
    drain(m)
}

/// Every server heartbeats: every group gets one primary, told by BecomePrimary, and leases
/// list exactly the groups each server is primary of.
pub(super) fn start(m: &mut Mds) -> BTreeMap<u32, ServerId> {
    let mut primaries = BTreeMap::new();
    for s in 0..6 {
        for (to, msg) in heartbeat(m, 1, s, 100 + s as u64) {
            if let Message::BecomePrimary { view, superblock } = msg {
                assert_eq!(superblock, None);
                let Endpoint::Server(p) = to else { panic!() };
                assert_eq!(view.primary, Some(p));
                assert!(primaries.insert(view.group.0, p).is_none());
            }
        }
    }
    assert_eq!(primaries.len(), m.group_count());
    primaries
}

#[test]
fn servers_heartbeating_get_primaries_and_leases() {
    let mut m = mds();
    let primaries = start(&mut m);
    let out = heartbeat(&mut m, 2 * S, 0, 100);
    let [(
        Endpoint::Server(0),
        Message::Lease {
            until,
            primaries: leased,
        },
    )] = &out[..]
    else {
        panic!("{out:?}");
    };
    assert_eq!(*until, 2 * S + m.config().lease_ns);
    let mut leased: Vec<u32> = leased.iter().map(|v| v.group.0).collect();
    leased.sort_unstable();
    let expected: Vec<u32> = primaries
        .iter()
        .filter(|(_, &p)| p == 0)
        .map(|(&g, _)| g)
        .collect();
    assert_eq!(leased, expected);
}

/// Gear 1 (§3.5): two gear groups are told to enter standby; their peers' primaries learn the
/// servers are unavailable; each released primary goes to the replica left on; the standby
/// message completes it. Gear 3 wakes them, and some primaries migrate back.
#[test]
fn a_gear_shift_migrates_primaries_and_back() {
    let mut m = mds();
    let mut primaries = start(&mut m);
    m.set_gear(10 * S, 1, &[0, 1, 2]);
    let out = drain(&mut m);
    let told: BTreeSet<ServerId> = out
        .iter()
        .filter(|(_, msg)| matches!(msg, Message::EnterStandby))
        .map(|(to, _)| match to {
            Endpoint::Server(s) => *s,
            _ => panic!(),
        })
        .collect();
    // Racks 0 and 1 (gear groups 0 and 1) go down.
    assert_eq!(told, BTreeSet::from([0, 1, 2, 3]));
    for s in 0..4 {
        assert_eq!(m.server_state(s), ServerState::Releasing);
    }
    // Primaries on rack 2 hear that their secondaries are going.
    for (_, msg) in &out {
        if let Message::GroupChanged { view } = msg {
            assert!(!view.all_available());
        }
    }
    // The leaving servers release their primaries.
    for (&g, &p) in primaries.clone().iter().filter(|(_, &p)| p < 4) {
        let epoch = m.view(GroupId(g)).epoch;
        m.handle_message(
            11 * S,
            Endpoint::Server(p),
            Message::ReleasedPrimary {
                group: GroupId(g),
                epoch,
            },
        );
        let out = drain(&mut m);
        let [(Endpoint::Server(to), Message::BecomePrimary { view, .. })] = &out[..] else {
            panic!("{out:?}");
        };
        assert!(*to >= 4, "the replica on the rack left on");
        assert_eq!(view.epoch, epoch + 1);
        primaries.insert(g, *to);
    }
    for s in 0..4 {
        m.handle_message(12 * S, Endpoint::Server(s), Message::Standby { server: s });
        assert_eq!(m.server_state(s), ServerState::Standby);
    }
    assert!(m.stats().migrations > 0);
    // Up again: woken, then primaries move back as the servers heartbeat.
    m.set_gear(20 * S, 3, &[0, 1, 2]);
    let woken: Vec<ServerId> = std::iter::from_fn(|| m.poll_wake()).collect();
    assert_eq!(woken, vec![0, 1, 2, 3]);
    let mut asked = 0;
    for s in 0..4 {
        for (to, msg) in heartbeat(&mut m, 21 * S, s, 100 + s as u64) {
            if let Message::ReleasePrimary { group, .. } = msg {
                assert_eq!(to, Endpoint::Server(primaries[&group.0]));
                asked += 1;
            }
        }
        assert_eq!(m.server_state(s), ServerState::Up);
    }
    assert!(asked > 0, "some primaries migrate back");
}

/// Gear 1 to gear 3 with three servers holding every group: the two woken servers heartbeat
/// one after the other while the first one's migrations are still being released, and each
/// of the three ends primary of a third of the groups (§3.5's rebalancing). A rule that
/// skips groups already migrating gave the second server half its share (a third of the
/// remaining half), so the first carried 1.4 × its share at the top gear and refused
/// requests as busy.
#[test]
fn servers_woken_together_each_take_a_fair_share_of_primaries() {
    let topology = Topology::racks(3, 1);
    let spec = LayoutSpec {
        kind: LayoutKind::PowerAware,
        racks: RackPolicy::Aligned,
        replicas: 3,
    };
    let groups = 300;
    let layout = Layout::generate(spec, &topology, groups, &mut SplitMix64(5)).unwrap();
    let mut m = Mds::new(MdsConfig::new(1 << 20), &layout, 0);
    for s in 0..3 {
        heartbeat(&mut m, 1, s, 100 + s as u64);
    }
    // Gear 1: servers 0 and 1 release every primary to server 2 and enter standby.
    m.set_gear(10 * S, 1, &[0, 1, 2]);
    drain(&mut m);
    for s in 0..2 {
        for g in 0..m.group_count() as u32 {
            let view = m.view(GroupId(g));
            if view.primary == Some(s) {
                let message = Message::ReleasedPrimary {
                    group: GroupId(g),
                    epoch: view.epoch,
                };
                m.handle_message(11 * S, Endpoint::Server(s), message);
            }
        }
        m.handle_message(12 * S, Endpoint::Server(s), Message::Standby { server: s });
    }
    drain(&mut m);
    assert!((0..m.group_count() as u32).all(|g| m.view(GroupId(g)).primary == Some(2)));
    // Gear 3: both wake; each heartbeats before server 2 has released anything.
    m.set_gear(20 * S, 3, &[0, 1, 2]);
    while m.poll_wake().is_some() {}
    let mut asked = Vec::new();
    for s in 0..2 {
        for (_, msg) in heartbeat(&mut m, 21 * S, s, 100 + s as u64) {
            if let Message::ReleasePrimary { group, epoch } = msg {
                asked.push((group, epoch));
            }
        }
    }
    // Server 2 releases what it was asked to (once each); the MDS hands each on.
    asked.sort_unstable();
    asked.dedup();
    for (group, epoch) in asked {
        m.handle_message(
            22 * S,
            Endpoint::Server(2),
            Message::ReleasedPrimary { group, epoch },
        );
    }
    drain(&mut m);
    let mut held = [0usize; 3];
    for g in 0..m.group_count() as u32 {
        held[m.view(GroupId(g)).primary.expect("a primary") as usize] += 1;
    }
    let fair = groups / 3;
    for (s, &n) in held.iter().enumerate() {
        assert!(
            n.abs_diff(fair) <= 1,
            "server {s} primary of {n} groups, a fair share is {fair}: {held:?}"
        );
    }
}

/// A silent server is suspected after the timeout: its primaries go to other replicas (new
/// epochs), its peers in standby are woken; after the permanent-failure time each of its
/// groups gets a new replica from the same gear group, and the primary is told to rebuild it.
#[test]
fn a_failed_server_is_suspected_then_rebuilt_in_its_gear_group() {
    let mut m = mds();
    let primaries = start(&mut m);
    // Servers 0–3 in standby (gear 1), then server 4 (rack 2) goes silent.
    m.set_gear(2 * S, 1, &[0, 1, 2]);
    drain(&mut m);
    for s in 0..4 {
        let groups: Vec<u32> = primaries
            .iter()
            .filter(|(_, &p)| p == s)
            .map(|(&g, _)| g)
            .collect();
        for g in groups {
            let epoch = m.view(GroupId(g)).epoch;
            m.handle_message(
                2 * S,
                Endpoint::Server(s),
                Message::ReleasedPrimary {
                    group: GroupId(g),
                    epoch,
                },
            );
        }
        m.handle_message(2 * S, Endpoint::Server(s), Message::Standby { server: s });
    }
    drain(&mut m);
    let t = 2 * S;
    heartbeat(&mut m, t, 5, 105);
    let deadline = m.poll_timeout().unwrap();
    assert!(deadline <= t + m.config().heartbeat_timeout_ns);
    // Server 5 keeps heartbeating; server 4 does not.
    heartbeat(&mut m, deadline - 1, 5, 105);
    m.handle_timeout(deadline.max(2 * S + m.config().heartbeat_timeout_ns));
    assert_eq!(m.server_state(4), ServerState::Suspect);
    let woken: BTreeSet<ServerId> = std::iter::from_fn(|| m.poll_wake()).collect();
    // Its peers in standby, and the suspect itself (it may be in standby, its last message
    // lost).
    assert!(woken.contains(&4), "{woken:?}");
    assert!(woken.iter().any(|&s| s < 4), "{woken:?}");
    assert!(woken.iter().all(|&s| s <= 4), "{woken:?}");
    let out = drain(&mut m);
    for (_, msg) in &out {
        if let Message::BecomePrimary { view, .. } = msg {
            assert_ne!(view.primary, Some(4));
        }
    }
    // Woken peers heartbeat; server 4 stays silent until it is declared failed.
    let suspected_at = deadline.max(2 * S + m.config().heartbeat_timeout_ns);
    let mut now = suspected_at + S;
    while m.server_state(4) != ServerState::Failed {
        assert!(
            now <= suspected_at + m.config().permanent_after_ns + S,
            "declared failed in time"
        );
        for s in [0, 1, 2, 3, 5] {
            heartbeat(&mut m, now, s, 100 + s as u64);
        }
        m.handle_timeout(now);
        now += S;
    }
    let out = drain(&mut m);
    let rebuilds: Vec<&GroupView> = out
        .iter()
        .filter_map(|(_, msg)| match msg {
            Message::Rebuild { view } => Some(view),
            _ => None,
        })
        .collect();
    assert!(!rebuilds.is_empty());
    for view in rebuilds {
        // Rack 2 = gear group 2: server 5 is the only other one.
        assert_eq!(view.rebuilding, Some(5));
        assert!(view.replicas.contains(&5) && !view.replicas.contains(&4));
    }
    assert_eq!(m.stats().permanent_failures, 1);
}

/// Both servers of gear group 2 (rack 2) fail for good: their gear group has no server left,
/// so each of their groups gets its new replica from another gear group (and rack) rather than
/// none — a group left naming a failed replica would keep its writes logged for ever (a
/// short schedule of 2026-11-29 held 512 KiB logged after its quiet period this way).
#[test]
fn a_gear_group_lost_whole_is_rebuilt_in_the_others() {
    let mut m = mds();
    start(&mut m);
    let mut now = 2 * S;
    while m.server_state(4) != ServerState::Failed || m.server_state(5) != ServerState::Failed {
        assert!(
            now <= 2 * S + m.config().permanent_after_ns + m.config().heartbeat_timeout_ns + 2 * S,
            "servers 4 and 5 declared failed in time"
        );
        for s in 0..4 {
            heartbeat(&mut m, now, s, 100 + s as u64);
        }
        m.handle_timeout(now);
        now += S;
    }
    drain(&mut m);
    assert_eq!(m.stats().permanent_failures, 2);
    for g in 0..m.group_count() as u32 {
        let view = m.view(GroupId(g));
        assert!(
            view.replicas.iter().all(|&s| s < 4),
            "group {g} still names a failed server: {:?}",
            view.replicas
        );
        assert_eq!(view.replicas.len(), 3, "group {g}: {:?}", view.replicas);
        if let Some(t) = view.rebuilding {
            assert!(t < 4 && view.replicas.contains(&t), "group {g}: {view:?}");
        }
    }
    // Every group had a replica on server 4 or 5 (one per gear group): each is rebuilt, some
    // twice (moved to the other one before it failed too).
    assert!(m.stats().rebuilds_started >= m.group_count() as u64);
}

/// Only the current primary, in its current epoch, writes a group's superblock.
#[test]
fn superblock_writes_are_fenced_by_epoch() {
    let mut m = mds();
    let primaries = start(&mut m);
    let (&g, &p) = primaries.iter().next().unwrap();
    let epoch = m.view(GroupId(g)).epoch;
    let write = |m: &mut Mds, from: ServerId, epoch: Epoch| {
        m.handle_message(
            3 * S,
            Endpoint::Server(from),
            Message::WriteSuperblock {
                id: 9,
                group: GroupId(g),
                epoch,
                data: vec![1, 2, 0, 0],
            },
        );
        match drain(m).pop() {
            Some((_, Message::SuperblockWritten { ok, .. })) => ok,
            other => panic!("{other:?}"),
        }
    };
    assert!(!write(&mut m, p, epoch - 1));
    assert!(!write(&mut m, (p + 1) % 6, epoch));
    assert!(write(&mut m, p, epoch));
    assert!(m.state_size().bytes > 0);
}

#[test]
fn objects_are_created_looked_up_and_deleted() {
    let mut m = mds();
    start(&mut m);
    let ask = |m: &mut Mds, message: Message| {
        m.handle_message(5 * S, Endpoint::Client(0), message);
        drain(m).pop().expect("an answer").1
    };
    let Message::Created {
        result: Ok(layout), ..
    } = ask(
        &mut m,
        Message::Create {
            id: 1,
            object: ObjectId(7),
            size_bytes: (5 << 20) + 1,
        },
    )
    else {
        panic!()
    };
    assert_eq!(layout.chunks.len(), 6);
    assert!(layout.groups.iter().all(|v| v.primary.is_some()));
    let Message::Created {
        result: Err(MdsError::Exists),
        ..
    } = ask(
        &mut m,
        Message::Create {
            id: 2,
            object: ObjectId(7),
            size_bytes: 1,
        },
    )
    else {
        panic!()
    };
    let Message::Located {
        result: Ok(again), ..
    } = ask(
        &mut m,
        Message::Lookup {
            id: 3,
            object: ObjectId(7),
        },
    )
    else {
        panic!()
    };
    assert_eq!(again.chunks, layout.chunks);
    let size = m.state_size();
    assert_eq!(size.chunks, 6);
    let Message::Deleted { result: Ok(()), .. } = ask(
        &mut m,
        Message::Delete {
            id: 4,
            object: ObjectId(7),
        },
    ) else {
        panic!()
    };
    let Message::Located {
        result: Err(MdsError::NoSuchObject),
        ..
    } = ask(
        &mut m,
        Message::Lookup {
            id: 5,
            object: ObjectId(7),
        },
    )
    else {
        panic!()
    };
    let Message::Created {
        result: Err(MdsError::TooLarge),
        ..
    } = ask(
        &mut m,
        Message::Create {
            id: 6,
            object: ObjectId(8),
            size_bytes: u64::MAX,
        },
    )
    else {
        panic!()
    };
}

/// Groups hold at most `slots_per_group_max` chunks: chunks drawn to a full group go to the
/// next with room, and an object that cannot fit is refused.
#[test]
fn groups_hold_at_most_their_slots() {
    let topology = Topology::racks(3, 2);
    let spec = LayoutSpec {
        kind: LayoutKind::PowerAware,
        racks: RackPolicy::Aligned,
        replicas: 3,
    };
    let layout = Layout::generate(spec, &topology, 24, &mut SplitMix64(3)).unwrap();
    let config = MdsConfig {
        slots_per_group_max: 2,
        ..MdsConfig::new(1 << 20)
    };
    let mut m = Mds::new(config, &layout, 0);
    start(&mut m);
    let create = |m: &mut Mds, object: u64, chunks: u64| {
        m.handle_message(
            2 * S,
            Endpoint::Client(0),
            Message::Create {
                id: object,
                object: ObjectId(object),
                size_bytes: chunks << 20,
            },
        );
        match drain(m).pop() {
            Some((_, Message::Created { result, .. })) => result,
            other => panic!("{other:?}"),
        }
    };
    // 24 groups × 2 slots: 40 chunks fit, then 8 more, then nothing.
    assert!(create(&mut m, 1, 40).is_ok());
    assert_eq!(create(&mut m, 2, 9).unwrap_err(), MdsError::TooLarge);
    let layout = create(&mut m, 3, 8).unwrap();
    assert_eq!(layout.chunks.len(), 8);
    assert!((0..m.group_count()).all(|g| m.view(GroupId(g as u32)).slots == 2));
    assert_eq!(create(&mut m, 4, 1).unwrap_err(), MdsError::TooLarge);
}

/// Full loggers wake a group's replicas (the loggers are not long-term storage): in gear 1, a
/// primary on rack 2 reports a group's loggers refusing writes as full; the MDS wakes the
/// standby servers holding its other replicas, and only those. A gear shift meanwhile keeps
/// them up. When the report clears, the plan applies again and they go back to standby.
#[test]
fn full_loggers_wake_the_group_replicas_until_the_log_drains() {
    let mut m = mds();
    let mut primaries = start(&mut m);
    m.set_gear(10 * S, 1, &[0, 1, 2]);
    drain(&mut m);
    for (&g, &p) in primaries.clone().iter().filter(|(_, &p)| p < 4) {
        let epoch = m.view(GroupId(g)).epoch;
        let released = Message::ReleasedPrimary {
            group: GroupId(g),
            epoch,
        };
        m.handle_message(11 * S, Endpoint::Server(p), released);
        for (to, msg) in drain(&mut m) {
            if let (Endpoint::Server(to), Message::BecomePrimary { .. }) = (to, msg) {
                primaries.insert(g, to);
            }
        }
    }
    for s in 0..4 {
        m.handle_message(12 * S, Endpoint::Server(s), Message::Standby { server: s });
    }
    assert!(std::iter::from_fn(|| m.poll_wake()).next().is_none());
    let (&g, &p) = primaries.iter().next().expect("a group");
    assert!(p >= 4, "rack 2 holds every primary in gear 1");
    let replicas = m.view(GroupId(g)).replicas.clone();
    let report = |m: &mut Mds, now: Nanos, log_full: Vec<GroupId>| {
        let held = (0..m.group_count() as u32)
            .map(|g| m.view(GroupId(g)))
            .filter(|v| v.primary == Some(p))
            .map(|v| (v.group, v.epoch))
            .collect();
        let heartbeat = Message::Heartbeat {
            server: p,
            incarnation: 100 + p as u64,
            sent_at: now,
            primaries: held,
            log_full,
        };
        m.handle_message(now, Endpoint::Server(p), heartbeat);
        drain(m)
    };
    report(&mut m, 13 * S, vec![GroupId(g)]);
    let mut woken: Vec<ServerId> = std::iter::from_fn(|| m.poll_wake()).collect();
    woken.sort_unstable();
    let mut expected: Vec<ServerId> = replicas.iter().copied().filter(|&r| r < 4).collect();
    expected.sort_unstable();
    assert_eq!(woken, expected, "the group's asleep replicas, no others");
    assert_eq!(m.stats().log_full_wakes, expected.len() as u64);
    for &s in &expected {
        heartbeat(&mut m, 14 * S, s, 100 + s as u64);
        assert_eq!(m.server_state(s), ServerState::Up);
    }
    // The plan is applied again (same gear): the group's replicas stay up.
    m.set_gear(15 * S, 1, &[0, 1, 2]);
    for &s in &expected {
        assert_eq!(m.server_state(s), ServerState::Up, "server {s}");
    }
    // Still full at the next heartbeat: nothing changes.
    report(&mut m, 16 * S, vec![GroupId(g)]);
    assert!(std::iter::from_fn(|| m.poll_wake()).next().is_none());
    // Drained: the plan takes them down again.
    let out = report(&mut m, 17 * S, Vec::new());
    for &s in &expected {
        assert_eq!(m.server_state(s), ServerState::Releasing, "server {s}");
        assert!(out.contains(&(Endpoint::Server(s), Message::EnterStandby)));
    }
}
