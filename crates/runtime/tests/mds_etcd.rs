//! The MDS's state in a real etcd (one member, started here): the journal restores what was
//! stored, across snapshots; a deposed leader's writes are refused by etcd itself.

use std::time::Duration;

use cordillera_gears::mds::persist::{Changes, GroupRecord, ObjectRecord, Snapshot};
use cordillera_gears::model::ObjectId;
use cordillera_runtime::etcd::Etcd;
use cordillera_runtime::sierra::mds_etcd::{EtcdState, NotLeader};
use cordillera_runtime::sierra::mds_leader::{Leadership, Standing};
use cordillera_testkit::process::{free_addr, have, Proc};

/// One etcd member on free loopback ports, its data in `dir`; its client endpoint.
fn start_etcd(dir: &std::path::Path) -> (Proc, String) {
    let client = free_addr().unwrap();
    let peer = free_addr().unwrap();
    let child = std::process::Command::new("etcd")
        .args([
            "--name=solo",
            &format!("--data-dir={}", dir.join("etcd").display()),
            &format!("--listen-client-urls=http://{client}"),
            &format!("--advertise-client-urls=http://{client}"),
            &format!("--listen-peer-urls=http://{peer}"),
            &format!("--initial-advertise-peer-urls=http://{peer}"),
            &format!("--initial-cluster=solo=http://{peer}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("etcd");
    let proc = Proc::adopt(child);
    let endpoint = client.to_string();
    let mut etcd = Etcd::new(std::slice::from_ref(&endpoint), Duration::from_secs(1)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while etcd.get(b"probe").is_err() {
        assert!(std::time::Instant::now() < deadline, "etcd did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    (proc, endpoint)
}

fn group(epoch: u64) -> GroupRecord {
    GroupRecord {
        replicas: vec![0, 1, 2],
        primary: Some((epoch % 3) as u32),
        epoch,
        superblock: None,
        next_slot: epoch as u32,
        rebuilding: None,
    }
}

/// Step `i`: group 0 changes epoch, and an object with a chunk is added.
fn step(i: u64) -> Changes {
    Changes {
        groups: vec![(0, group(i))],
        objects: vec![(
            ObjectId(i),
            Some(ObjectRecord {
                size_bytes: 1 << 20,
                first_chunk: i,
                chunk_count: 1,
            }),
        )],
        chunks: vec![(i, (0, i as u32))],
        rng: Some(i),
        ..Changes::default()
    }
}

fn elect(endpoint: &str, name: &str) -> Leadership {
    let stop = std::sync::atomic::AtomicBool::new(false);
    Leadership::campaign(&[endpoint.to_string()], b"/t/", name, 2, |_| {}, &stop).unwrap()
}

#[test]
fn the_journal_restores_across_snapshots_and_a_deposed_leader_writes_nothing() {
    if !have("etcd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_etcd, endpoint) = start_etcd(dir.path());
    let client = || Etcd::new(std::slice::from_ref(&endpoint), Duration::from_secs(2)).unwrap();

    let a = elect(&endpoint, "a");
    assert_eq!(a.standing(), Standing::Holds);
    let mut state = EtcdState::open(client(), b"/t/", a.revision).unwrap();
    assert!(state.snapshot().is_none(), "a new cluster holds nothing");
    state.set_snapshot_steps(4);
    let mut expected = Snapshot::default();
    for i in 0..10 {
        state.store(&step(i)).unwrap();
        expected.apply(&step(i)).unwrap();
    }
    assert_eq!(state.journal(), (2, 2), "two snapshots, two steps after");
    let restored = EtcdState::open(client(), b"/t/", a.revision).unwrap();
    assert_eq!(restored.snapshot(), Some(expected.clone()));

    // A is deposed (its lease ends) and B elected: A's writes are refused by etcd.
    a.resign();
    let b = elect(&endpoint, "b");
    assert!(b.revision > 0);
    let err = state.store(&step(10)).unwrap_err();
    assert!(err.is::<NotLeader>(), "{err:#}");
    let err = state.set_meta("gear", Some(&[1])).unwrap_err();
    assert!(err.is::<NotLeader>(), "{err:#}");
    let mut state_b = EtcdState::open(client(), b"/t/", b.revision).unwrap();
    assert_eq!(
        state_b.snapshot(),
        Some(expected.clone()),
        "nothing of A's late writes"
    );
    assert_eq!(state_b.meta("gear").unwrap(), None);
    state_b.store(&step(10)).unwrap();
    expected.apply(&step(10)).unwrap();
    let again = EtcdState::open(client(), b"/t/", b.revision).unwrap();
    assert_eq!(again.snapshot(), Some(expected));
}
