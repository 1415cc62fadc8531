use super::*;

/// A replicated write whose secondary does not answer in time, while the primary's own disk
/// is still writing it: once the secondary is given up on, the server's next timeout is
/// in the future (it once stayed due, and the simulator spun at one instant; found by the
/// testbed lab at an up-shift, disks queued for over a second).
#[test]
fn a_write_given_up_on_waits_for_its_disk_without_a_due_timer() {
    let config = ServerConfig::new(0, 1 << 20, 64 << 20, vec![0, 1], Vec::new());
    let timeout = config.replicate_timeout_ns;
    let mut s = ChunkServer::new(config, 1, 0);
    let view = GroupView {
        group: GroupId(3),
        epoch: 1,
        replicas: vec![0, 1],
        primary: Some(0),
        available: 0b11,
        rebuilding: None,
        slots: 1,
    };
    s.handle_message(
        1,
        Endpoint::Mds,
        Message::Lease {
            until: 100 * timeout,
            primaries: vec![view.clone()],
        },
    );
    s.handle_message(
        1,
        Endpoint::Mds,
        Message::BecomePrimary {
            view,
            superblock: None,
        },
    );
    let mut now = 2;
    // The log client writes its superblock at the MDS first.
    for _ in 0..4 {
        while let Some((_, m)) = s.poll_message() {
            if let Message::WriteSuperblock { id, .. } = m {
                s.handle_message(
                    now,
                    Endpoint::Mds,
                    Message::SuperblockWritten { id, ok: true },
                );
            }
        }
    }
    s.handle_message(
        now,
        Endpoint::Client(0),
        Message::Write {
            id: 9,
            group: GroupId(3),
            offset_bytes: 0,
            data: vec![1; 4096],
        },
    );
    let mut replicated = false;
    while let Some((to, m)) = s.poll_message() {
        replicated |= matches!((to, m), (Endpoint::Server(1), Message::Replicate { .. }));
    }
    let mut local = false;
    while let Some(io) = s.poll_io() {
        local |= matches!(io, ChunkIo::Write { .. });
    }
    assert!(
        replicated && local,
        "the write went to the secondary and the disk"
    );
    // Neither answers; the secondary's time runs out.
    now += timeout;
    let due = s.poll_timeout().expect("a timeout");
    assert!(due <= now);
    s.handle_timeout(now);
    let next = s.poll_timeout().expect("a timeout");
    assert!(
        next > now,
        "the next timeout {next} is due at once (now {now})"
    );
}
