use super::*;
use cordillera_vstore::store::StoreError;

/// Group `group` at `epoch` on servers 0 and 1, server 0 its primary, both available.
fn view(group: u32, epoch: Epoch) -> GroupView {
    GroupView {
        group: GroupId(group),
        epoch,
        replicas: vec![0, 1],
        primary: Some(0),
        available: 0b11,
        rebuilding: None,
        slots: 1,
    }
}

/// Server 0 (no loggers), told at time 1 to be the primary of `views` under a lease far
/// ahead; its superblocks not yet written.
fn primary_of(views: &[GroupView]) -> ChunkServer {
    let config = ServerConfig::new(0, 1 << 20, 64 << 20, vec![0, 1], Vec::new());
    let until = 100 * config.replicate_timeout_ns;
    let mut s = ChunkServer::new(config, 1, 0);
    s.handle_message(
        1,
        Endpoint::Mds,
        Message::Lease {
            until,
            primaries: views.to_vec(),
        },
    );
    for view in views {
        s.handle_message(
            1,
            Endpoint::Mds,
            Message::BecomePrimary {
                view: view.clone(),
                superblock: None,
            },
        );
    }
    s
}

/// Answers the server's superblock writes at the MDS (the log client writes its superblock
/// before a primary serves), at `now`; what else it sends is dropped.
fn superblocks_written(s: &mut ChunkServer, now: Nanos) {
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
}

/// [`primary_of`] one view, serving from time 2.
fn serving(view: GroupView) -> ChunkServer {
    let mut s = primary_of(&[view]);
    superblocks_written(&mut s, 2);
    s
}

/// A replicated write whose secondary does not answer in time, while the primary's own disk
/// is still writing it: once the secondary is given up on, the server's next timeout is
/// in the future (it once stayed due, and the simulator spun at one instant; found by the
/// testbed lab at an up-shift, disks queued for over a second).
#[test]
fn a_write_given_up_on_waits_for_its_disk_without_a_due_timer() {
    let mut s = serving(view(3, 1));
    let timeout = s.config.replicate_timeout_ns;
    let mut now = 2;
    s.handle_message(
        now,
        Endpoint::Client(0),
        Message::Write {
            id: 9,
            piece: 9,
            group: GroupId(3),
            epoch: 1,
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

/// What [`full_loggers`] saw.
struct FullRun {
    s: ChunkServer,
    now: Nanos,
    /// Each attempt of the write: when it was sent, when answered, and the answer.
    attempts: Vec<(Nanos, Nanos, Result<(), ServeError>)>,
    full_refusals: usize,
    reported_full: bool,
}

/// A write that must be logged (the group's other replicas asleep) while the loggers in `full`
/// (by index, of three) refuse writes as full for `full_for_ns` (then take them), sent again by
/// its client as the client does after a retryable refusal, until it is answered for good and
/// the heartbeats have named the group.
fn full_loggers(full: &[u64], full_for_ns: Nanos) -> FullRun {
    let loggers = (0..3)
        .map(|i| LoggerInfo {
            id: 100 + i,
            rack: i as RackId,
            server: None,
        })
        .collect();
    let config = ServerConfig::new(0, 1 << 20, 64 << 20, vec![0, 1, 2], loggers);
    let client_timeout = crate::client::ClientConfig::new(0).request_timeout_ns;
    let mut s = ChunkServer::new(config, 1, 0);
    let view = GroupView {
        group: GroupId(3),
        epoch: 1,
        replicas: vec![0, 1, 2],
        primary: Some(0),
        available: 0b001,
        rebuilding: None,
        slots: 1,
    };
    let lease = Message::Lease {
        until: 1000 * client_timeout,
        primaries: vec![view.clone()],
    };
    s.handle_message(1, Endpoint::Mds, lease);
    let become_primary = Message::BecomePrimary {
        view,
        superblock: None,
    };
    s.handle_message(1, Endpoint::Mds, become_primary);
    let write = |id| Message::Write {
        id,
        piece: id,
        group: GroupId(3),
        epoch: 1,
        offset_bytes: 0,
        data: vec![1; 4096],
    };
    let mut attempts: Vec<(Nanos, Nanos, Result<(), ServeError>)> = Vec::new();
    let mut sent: Option<(u64, Nanos)> = None;
    let mut resend_at: Option<Nanos> = None;
    let mut done = false;
    let mut now = 2;
    let mut first_refusal: Option<Nanos> = None;
    let mut full_refusals = 0;
    let mut reported_full = false;
    while (!done || !reported_full) && now < 60 * client_timeout {
        // The MDS keeps the superblock; the disk writes; the loggers take anything but
        // writes while they are full.
        while let Some((to, m)) = s.poll_message() {
            match m {
                Message::WriteSuperblock { id, .. } => {
                    let written = Message::SuperblockWritten { id, ok: true };
                    s.handle_message(now, Endpoint::Mds, written);
                }
                Message::WriteDone { id, result } if to == Endpoint::Client(0) => {
                    let (sent_id, at) = sent.take().expect("an attempt in flight");
                    assert_eq!(id, sent_id);
                    attempts.push((at, now, result));
                    // The client tries a busy server again after a delay.
                    match result {
                        Err(ServeError::Busy) => resend_at = Some(now + 100_000_000),
                        _ => done = true,
                    }
                }
                Message::Heartbeat { log_full, .. } => {
                    reported_full |= log_full == vec![GroupId(3)];
                }
                _ => {}
            }
        }
        while let Some(io) = s.poll_io() {
            let done = match io {
                ChunkIo::Read {
                    id, length_bytes, ..
                } => ChunkIoDone::Read {
                    id,
                    data: vec![0; length_bytes as usize],
                },
                ChunkIo::Write { id, .. } => ChunkIoDone::Written { id },
            };
            s.handle_io(now, done);
        }
        let mut replies = Vec::new();
        while let Some((logger, id, request)) = s.poll_store() {
            let full =
                full.contains(&(logger - 100)) && now < first_refusal.unwrap_or(now) + full_for_ns;
            let reply = match request {
                StoreRequest::Write { .. } if full => {
                    first_refusal.get_or_insert(now);
                    full_refusals += 1;
                    StoreReply::Error(StoreError::Full)
                }
                StoreRequest::Write { .. } => StoreReply::Done,
                StoreRequest::Metadata { .. } => StoreReply::Metadata(Vec::new()),
                StoreRequest::Read { .. } => StoreReply::Read(Vec::new()),
                StoreRequest::ReadAny { .. } => StoreReply::ReadAny(None),
                StoreRequest::Delete { .. } => StoreReply::Done,
            };
            replies.push((id, reply));
        }
        let progressed = !replies.is_empty();
        for (id, reply) in replies {
            s.handle_store(now, id, reply, None);
        }
        if progressed {
            continue;
        }
        let due = resend_at.is_some_and(|t| now >= t)
            || (attempts.is_empty()
                && sent.is_none()
                && s.primaries().any(|(g, _)| g == GroupId(3)));
        if !done && sent.is_none() && due {
            let id = 9 + attempts.len() as u64;
            sent = Some((id, now));
            resend_at = None;
            s.handle_message(now, Endpoint::Client(0), write(id));
            continue;
        }
        let mut next = s.poll_timeout().map_or(now + 1_000_000, |t| t.max(now + 1));
        if let Some(t) = resend_at {
            next = next.min(t.max(now + 1));
        }
        now = next;
        s.handle_timeout(now);
    }
    FullRun {
        s,
        now,
        attempts,
        full_refusals,
        reported_full,
    }
}

/// A write that must be logged while every logger refuses it as full: each attempt is answered
/// before the clients' request timeout, so a client sees an answer instead of timing out and
/// sending it again into the same wait (the full-rate testbed with 1 GiB loggers stalled this
/// way: 13,207 client timeouts in ten simulated minutes, the simulator slowed tenfold, no
/// ENOSPC). The answer is "busy" (the client tries again) until the loggers have refused for
/// `log_full_final_ns`, then `NoSpace`; the heartbeats name the group, so that the MDS wakes
/// its replicas.
#[test]
fn a_write_the_full_loggers_refuse_is_answered_before_the_clients_timeout() {
    let run = full_loggers(&[0, 1, 2], Nanos::MAX / 4);
    let client_timeout = crate::client::ClientConfig::new(0).request_timeout_ns;
    let final_ns = run.s.config.log_full_final_ns;
    assert!(
        run.full_refusals >= 3,
        "the loggers refused it: {}",
        run.full_refusals
    );
    for &(sent, at, _) in &run.attempts {
        assert!(
            at - sent < client_timeout,
            "answered {} ms after it arrived; the clients time out at {} ms",
            (at - sent) / 1_000_000,
            client_timeout / 1_000_000
        );
    }
    let (first_sent, _, first) = run.attempts[0];
    assert_eq!(first, Err(ServeError::Busy), "{:?}", run.attempts);
    let &(_, last_at, last) = run.attempts.last().unwrap();
    assert_eq!(last, Err(ServeError::NoSpace), "{:?}", run.attempts);
    assert!(
        last_at - first_sent >= final_ns,
        "ENOSPC after {} ms of refusals, before the {} ms the loggers are given",
        (last_at - first_sent) / 1_000_000,
        final_ns / 1_000_000
    );
    assert!(
        run.reported_full,
        "the heartbeats tell the MDS the group's loggers are full"
    );
    let (mut s, mut now) = (run.s, run.now);
    // The replicas are up and nothing of the group is logged. The group stays named for
    // `log_full_hold_ns` after the last refusal (a client's next attempt comes up to 1 s
    // later: were the replicas sent back to standby first, it would find the loggers full
    // again, and again — a cluster test's writer got EIO after 49 attempts that way); then the
    // mark clears and the gear's plan applies again.
    let last_refusal = run.attempts.last().unwrap().1;
    let hold = s.config.log_full_hold_ns;
    assert!(
        hold > crate::client::RETRY_DELAY_MAX_NS + s.config.heartbeat_interval_ns,
        "the hold ({hold} ns) outlasts a client's longest wait between attempts"
    );
    let view = GroupView {
        available: 0b111,
        ..s.primaries[&GroupId(3)].view.clone()
    };
    s.handle_message(now, Endpoint::Mds, Message::GroupChanged { view });
    let mut reports: Vec<(Nanos, Vec<GroupId>)> = Vec::new();
    while now < last_refusal + hold + 2 * s.config.heartbeat_interval_ns {
        now = s.poll_timeout().map_or(now + 1_000_000, |t| t.max(now + 1));
        s.handle_timeout(now);
        while let Some((_, m)) = s.poll_message() {
            if let Message::Heartbeat { log_full, .. } = m {
                reports.push((now, log_full));
            }
        }
        while s.poll_store().is_some() {}
    }
    for (at, named) in &reports {
        let held = *at < last_refusal + hold;
        assert_eq!(
            named.is_empty(),
            !held,
            "{} ms after the last refusal (hold {} ms): {named:?}",
            (at - last_refusal) / 1_000_000,
            hold / 1_000_000
        );
    }
    assert!(reports.len() >= 3, "heartbeats: {reports:?}");
    assert!(
        reports.last().unwrap().1.is_empty(),
        "the group is no longer named"
    );
}

/// Loggers full for a moment (cleaning, a burst) and then taking writes again: the write is
/// answered "busy" within the clients' timeout and succeeds when sent again — not ENOSPC, which
/// a file system above takes as final (a failover test under load saw exactly that, with 1 s
/// between the first refusal and ENOSPC).
#[test]
fn loggers_full_for_a_moment_delay_a_write_but_do_not_fail_it() {
    let run = full_loggers(&[0, 1, 2], 1_500_000_000);
    assert!(run.full_refusals >= 1, "the loggers refused it");
    let (_, _, first) = run.attempts[0];
    assert_eq!(first, Err(ServeError::Busy), "{:?}", run.attempts);
    let &(_, _, last) = run.attempts.last().unwrap();
    assert_eq!(last, Ok(()), "{:?}", run.attempts);
}

/// One logger of three full for good, the other two taking writes (each group logs to all
/// three): no write gets its copies, and the full one holds other groups' data that only their
/// replicas, woken, would reclaim. The write is answered "busy" and then ENOSPC, as with every
/// logger full, and the heartbeats name the group, so that the MDS wakes its replicas. Before,
/// each short write was answered "unavailable" (too few copies), the client sent it again for
/// ever, and no heartbeat named the group: the two loggers' acceptances cleared the full mark
/// (a cluster test's write hung 240 s in gear 1 with 16 MiB loggers, one of them filled with
/// data of groups whose replicas slept).
#[test]
fn one_full_logger_of_three_wakes_the_replicas_like_all_three() {
    let run = full_loggers(&[1], Nanos::MAX / 4);
    assert!(
        run.full_refusals >= 3,
        "the full logger refused: {}",
        run.full_refusals
    );
    let (_, _, first) = run.attempts[0];
    assert_eq!(first, Err(ServeError::Busy), "{:?}", run.attempts);
    let &(_, _, last) = run.attempts.last().unwrap();
    assert_eq!(last, Err(ServeError::NoSpace), "{:?}", run.attempts);
    assert!(
        run.reported_full,
        "the heartbeats tell the MDS the group's loggers are full"
    );
}

/// The server's earliest deadline, walking every group (what `poll_timeout` computed after
/// every event before the groups' deadlines were kept per group).
fn walked_timeout(s: &ChunkServer) -> Option<Nanos> {
    let d = Deadlines::of(&s.config);
    let mut at = s.next_heartbeat;
    if !s.primaries.is_empty() {
        at = at.min(s.lease_until);
    }
    for p in s.primaries.values() {
        if let Some(t) = d.of_group(p) {
            at = at.min(t);
        }
    }
    Some(at)
}

/// The deadlines kept per group follow each group's changes: primary of two groups, a write
/// to one moves the server's earliest deadline to that write's replication timeout, and
/// giving up on the secondary moves it on; at every step the kept deadline is the one a walk
/// of every group finds.
#[test]
fn the_kept_deadline_follows_the_group_that_changed() {
    let mut s = primary_of(&[view(3, 1), view(4, 1)]);
    let timeout = s.config.replicate_timeout_ns;
    assert_eq!(s.primaries.len(), 2);
    assert_eq!(s.poll_timeout(), walked_timeout(&s));
    let now = 2;
    for _ in 0..4 {
        while let Some((_, m)) = s.poll_message() {
            if let Message::WriteSuperblock { id, .. } = m {
                s.handle_message(
                    now,
                    Endpoint::Mds,
                    Message::SuperblockWritten { id, ok: true },
                );
                assert_eq!(s.poll_timeout(), walked_timeout(&s));
            }
        }
    }
    let before = s.poll_timeout().expect("a timeout");
    s.handle_message(
        now,
        Endpoint::Client(0),
        Message::Write {
            id: 9,
            piece: 9,
            group: GroupId(4),
            epoch: 1,
            offset_bytes: 0,
            data: vec![1; 4096],
        },
    );
    let with_write = s.poll_timeout().expect("a timeout");
    assert_eq!(Some(with_write), walked_timeout(&s));
    assert!(
        with_write <= now + timeout && with_write <= before,
        "the write's replication timeout {} is the earliest: {with_write} (before it {before})",
        now + timeout
    );
    while s.poll_message().is_some() {}
    while s.poll_io().is_some() {}
    s.handle_timeout(now + timeout);
    let after = s.poll_timeout().expect("a timeout");
    assert_eq!(Some(after), walked_timeout(&s));
    assert!(
        after > now + timeout,
        "the given-up write's deadline is gone"
    );
}

/// A client's write attempt held up in the network must not land once its group has moved on
/// or a newer write of the same client has been taken: the primary refuses an attempt sent
/// under another epoch's view, and one with an id no newer than a write it took from the same
/// client (the client's other half: `a_late_answer_does_not_acknowledge_…` in its tests).
#[test]
fn a_stale_write_attempt_is_refused_not_applied() {
    let mut s = serving(view(3, 5));
    // What each write brought: its answer, if any, and whether it was replicated.
    let attempt = |s: &mut ChunkServer, from: u32, id: u64, epoch: Epoch| {
        s.handle_message(
            3,
            Endpoint::Client(from),
            Message::Write {
                id,
                piece: id,
                group: GroupId(3),
                epoch,
                // Apart: a write over one in flight waits for it.
                offset_bytes: from as u64 * 8192,
                data: vec![id as u8; 4096],
            },
        );
        let mut answer = None;
        let mut replicated = false;
        while let Some((to, m)) = s.poll_message() {
            match (to, m) {
                (_, Message::WriteDone { id: i, result }) if i == id => answer = Some(result),
                (Endpoint::Server(1), Message::Replicate { .. }) => replicated = true,
                _ => {}
            }
        }
        while s.poll_io().is_some() {}
        (answer, replicated)
    };
    assert_eq!(
        attempt(&mut s, 0, 10, 4),
        (Some(Err(ServeError::NotPrimary)), false),
        "an attempt under an older view"
    );
    assert_eq!(
        attempt(&mut s, 0, 11, 6),
        (Some(Err(ServeError::Unavailable)), false),
        "an attempt under a view newer than the primary's"
    );
    assert_eq!(attempt(&mut s, 0, 20, 5), (None, true), "taken");
    assert_eq!(
        attempt(&mut s, 0, 15, 5),
        (Some(Err(ServeError::Unavailable)), false),
        "an attempt older than a write taken from the same client"
    );
    assert_eq!(
        attempt(&mut s, 1, 15, 5),
        (None, true),
        "another client's ids are its own"
    );
    assert_eq!(s.stats().refused_stale, 3);
}

/// A client's retry of a write still in flight at the primary (its answer late, the primary
/// slow) joins it: applied once (one replicated write), and both attempts answered when it is
/// done, so the client need not wait for a second application it could not tell from a stale
/// one.
#[test]
fn a_retry_of_a_write_in_flight_joins_it_and_both_are_answered() {
    let mut s = primary_of(&[view(3, 2)]);
    let write = |id| Message::Write {
        id,
        piece: 30,
        group: GroupId(3),
        epoch: 2,
        offset_bytes: 4096,
        data: vec![5; 4096],
    };
    let mut replicates = Vec::new();
    let mut disk = Vec::new();
    let mut answers = Vec::new();
    let mut drain = |s: &mut ChunkServer, replicates: &mut Vec<u64>, disk: &mut Vec<u64>| {
        while let Some((to, m)) = s.poll_message() {
            match (to, m) {
                (_, Message::WriteSuperblock { id, .. }) => s.handle_message(
                    2,
                    Endpoint::Mds,
                    Message::SuperblockWritten { id, ok: true },
                ),
                (Endpoint::Server(1), Message::Replicate { id, .. }) => replicates.push(id),
                (Endpoint::Client(0), Message::WriteDone { id, result }) => {
                    answers.push((id, result))
                }
                _ => {}
            }
        }
        while let Some(io) = s.poll_io() {
            if let ChunkIo::Write { id, .. } = io {
                disk.push(id);
            }
        }
    };
    drain(&mut s, &mut replicates, &mut disk);
    s.handle_message(3, Endpoint::Client(0), write(30));
    drain(&mut s, &mut replicates, &mut disk);
    assert_eq!(replicates.len(), 1, "the first attempt is replicated");
    s.handle_message(4, Endpoint::Client(0), write(31));
    drain(&mut s, &mut replicates, &mut disk);
    assert_eq!(replicates.len(), 1, "the retry is not applied again");
    for id in std::mem::take(&mut replicates) {
        s.handle_message(5, Endpoint::Server(1), Message::Replicated { id, ok: true });
    }
    for id in std::mem::take(&mut disk) {
        s.handle_io(5, ChunkIoDone::Written { id });
    }
    drain(&mut s, &mut replicates, &mut disk);
    answers.sort_by_key(|(id, _)| *id);
    assert_eq!(answers, vec![(30, Ok(())), (31, Ok(()))]);
}
