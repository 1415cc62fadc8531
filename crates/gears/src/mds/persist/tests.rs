//! The MDS's durable state: changes that add up to the snapshot, a restart that keeps
//! primaries and epochs, records that round-trip, and stored state that is rejected.

use super::super::tests::{drain, heartbeat, mds, start, S};
use super::*;
use crate::layout::{LayoutKind, LayoutSpec, RackPolicy};
use crate::model::{GroupId, Topology};
use crate::protocol::{Endpoint, Message};
use cordillera_types::rng::SplitMix64;

fn layout() -> Layout {
    let topology = Topology::racks(3, 2);
    let spec = LayoutSpec {
        kind: LayoutKind::PowerAware,
        racks: RackPolicy::Aligned,
        replicas: 3,
    };
    Layout::generate(spec, &topology, 24, &mut SplitMix64(3)).unwrap()
}

fn create(m: &mut Mds, id: u64, object: u64, size_bytes: u64) {
    m.handle_message(
        5 * S,
        Endpoint::Client(0),
        Message::Create {
            id,
            object: ObjectId(object),
            size_bytes,
        },
    );
    drain(m);
}

/// After every step of a run — start, objects created and deleted, superblocks, a gear shift,
/// a server suspected and failed — the changes taken so far, applied in order, equal the
/// snapshot.
#[test]
fn changes_add_up_to_the_snapshot() {
    let mut m = mds();
    let mut stored = Snapshot::default();
    let mut step = |m: &mut Mds, what: &str| {
        let changes = m.take_changes();
        stored.apply(&changes).unwrap();
        assert_eq!(stored, m.snapshot(), "after {what}");
        // Nothing new: nothing to store.
        assert!(m.take_changes().is_empty(), "after {what}");
    };
    step(&mut m, "new");
    let primaries = start(&mut m);
    step(&mut m, "start");
    create(&mut m, 1, 7, 5 << 20);
    create(&mut m, 2, 8, 3 << 20);
    step(&mut m, "create");
    m.handle_message(
        6 * S,
        Endpoint::Client(0),
        Message::Delete {
            id: 3,
            object: ObjectId(7),
        },
    );
    drain(&mut m);
    step(&mut m, "delete");
    let (&g, &p) = primaries.iter().next().unwrap();
    let epoch = m.view(GroupId(g)).epoch;
    m.handle_message(
        7 * S,
        Endpoint::Server(p),
        Message::WriteSuperblock {
            id: 1,
            group: GroupId(g),
            epoch,
            data: vec![9; 40],
        },
    );
    drain(&mut m);
    step(&mut m, "superblock");
    m.set_gear(8 * S, 2, &[0, 1, 2]);
    drain(&mut m);
    step(&mut m, "gear 2");
    // Everyone but server 5 keeps heartbeating until 5 is declared failed and rebuilt.
    let mut now = 9 * S;
    while m.server_state(5) != ServerState::Failed {
        for s in 0..5 {
            heartbeat(&mut m, now, s, 100 + s as u64);
        }
        m.handle_timeout(now);
        drain(&mut m);
        step(&mut m, "a heartbeat round");
        now += 30 * S;
    }
    assert_eq!(stored.servers[5].state, ServerState::Failed);
}

/// A restarted MDS keeps every group's primary and epoch: a primary that heartbeats what it
/// serves gets its lease without a new epoch, and objects read back as before.
#[test]
fn a_restart_keeps_primaries_epochs_and_objects() {
    let mut m = mds();
    let primaries = start(&mut m);
    create(&mut m, 1, 7, 5 << 20);
    let before = m.snapshot();
    let layout_before = m.layout_of(ObjectId(7)).unwrap();
    let mut r = Mds::restore(m.config().clone(), &layout(), before.clone(), 20 * S).unwrap();
    assert_eq!(r.snapshot(), before);
    assert!(r.take_changes().is_empty());
    assert_eq!(r.layout_of(ObjectId(7)).unwrap(), layout_before);
    for s in 0..6 {
        let out = heartbeat(&mut r, 20 * S + 1, s, 100 + s as u64);
        assert!(
            !out.iter()
                .any(|(_, msg)| matches!(msg, Message::BecomePrimary { .. })),
            "{out:?}"
        );
    }
    for (&g, &p) in &primaries {
        let view = r.view(GroupId(g));
        assert_eq!(view.primary, Some(p));
        assert_eq!(view.epoch, before.groups[g as usize].epoch);
    }
    // A server that restarted while the MDS was down (a new incarnation) gets its groups
    // reassigned under new epochs.
    let out = heartbeat(&mut r, 21 * S, 0, 999);
    let reassigned = out
        .iter()
        .filter(|(_, msg)| matches!(msg, Message::BecomePrimary { .. }))
        .count();
    assert_eq!(reassigned, primaries.values().filter(|&&p| p == 0).count());
}

/// A server the MDS had sent to standby stays in standby after the restart (it is not woken,
/// nor suspected); one being woken is woken again.
#[test]
fn a_restart_keeps_standby_and_wakes_again() {
    let mut m = mds();
    start(&mut m);
    let mut snapshot = m.snapshot();
    snapshot.servers[0].state = ServerState::Standby;
    snapshot.servers[0].wanted_off = true;
    snapshot.servers[1].state = ServerState::Waking;
    let r = Mds::restore(m.config().clone(), &layout(), snapshot, 30 * S).unwrap();
    let mut r = r;
    assert_eq!(r.server_state(0), ServerState::Standby);
    assert_eq!(
        std::iter::from_fn(|| r.poll_wake()).collect::<Vec<_>>(),
        [1]
    );
    // The others heartbeat (server 1 once woken); server 0, asleep, is left alone.
    for i in 1..=10 {
        let now = 30 * S + i * S;
        for s in 1..6 {
            heartbeat(&mut r, now, s, 100 + s as u64);
        }
        r.handle_timeout(now);
    }
    assert_eq!(r.server_state(0), ServerState::Standby);
    assert_eq!(r.server_state(1), ServerState::Up);
    // The record had server 0 in standby still primary of its groups (no step leaves that
    // behind): each went to a replica that heartbeats.
    for g in 0..r.group_count() as u32 {
        let primary = r.view(GroupId(g)).primary;
        assert!(
            primary.is_some_and(|p| p != 0),
            "group {g}: primary {primary:?}"
        );
    }
}

#[test]
fn records_round_trip_and_truncations_are_rejected() {
    let group = GroupRecord {
        replicas: vec![1, 4, 5],
        primary: Some(4),
        epoch: 77,
        superblock: Some(vec![3; 100]),
        next_slot: 12,
        rebuilding: None,
    };
    let object = ObjectRecord {
        size_bytes: 5 << 20,
        first_chunk: 9,
        chunk_count: 5,
    };
    let server = ServerRecord {
        state: ServerState::Releasing,
        wanted_off: true,
        incarnation: Some(1 << 40),
    };
    let bytes = [group.encode(), object.encode(), server.encode()];
    assert_eq!(GroupRecord::decode(&bytes[0]).unwrap(), group);
    assert_eq!(ObjectRecord::decode(&bytes[1]).unwrap(), object);
    assert_eq!(ServerRecord::decode(&bytes[2]).unwrap(), server);
    type Decode = fn(&[u8]) -> bool;
    let decoders: [Decode; 3] = [
        |b| GroupRecord::decode(b).is_ok(),
        |b| ObjectRecord::decode(b).is_ok(),
        |b| ServerRecord::decode(b).is_ok(),
    ];
    for (b, decodes) in bytes.iter().zip(decoders) {
        assert!(decodes(b));
        for cut in 0..b.len() {
            assert!(!decodes(&b[..cut]), "cut at {cut} of {}", b.len());
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(!decodes(&longer), "trailing bytes");
    }
    let mut wrong = bytes[1].clone();
    wrong[0] = 2;
    assert_eq!(ObjectRecord::decode(&wrong), Err(PersistError::Version(2)));
    assert_eq!(chunk_from_u64(chunk_to_u64((7, u32::MAX))), (7, u32::MAX));
}

/// Stored state that this cluster's MDS could not have written is refused with a reason.
#[test]
fn state_that_does_not_fit_the_cluster_is_refused() {
    let mut m = mds();
    start(&mut m);
    create(&mut m, 1, 7, 5 << 20);
    let good = m.snapshot();
    let config = m.config().clone();
    let refuse = |s: Snapshot| match Mds::restore(config.clone(), &layout(), s, 0) {
        Err(PersistError::Invalid(why)) => why,
        Ok(_) => panic!("restored"),
        Err(e) => panic!("{e}"),
    };
    let mut s = good.clone();
    s.groups.pop();
    refuse(s);
    let mut s = good.clone();
    s.servers.push(s.servers[0]);
    refuse(s);
    let mut s = good.clone();
    s.groups[0].replicas[1] = 99;
    refuse(s);
    let mut s = good.clone();
    s.groups[0].replicas[1] = s.groups[0].replicas[0];
    refuse(s);
    let mut s = good.clone();
    s.groups[0].primary = Some(99);
    refuse(s);
    let mut s = good.clone();
    let (g, _) = s.chunks[0];
    s.chunks[0] = (g, s.groups[g as usize].next_slot);
    refuse(s);
    let mut s = good.clone();
    s.objects.get_mut(&ObjectId(7)).unwrap().chunk_count = 1000;
    refuse(s);
    assert!(Mds::restore(config.clone(), &layout(), good, 0).is_ok());
}
