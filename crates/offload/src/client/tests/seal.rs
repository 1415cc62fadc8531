//! A copy whose outcome is unknown may still land: reads of what it would hide wait for a
//! barrier after which it cannot.

use super::*;

/// Store 0 holds the only copy of write 1. Write 2 over it is sent there, the store goes
/// silent, and the client counts the store failed: write 2's outcome there is unknown, and
/// the write fails (ENOSPC: it must stay off-loaded and no store is up). A store slow rather
/// than gone may still apply write 2 later — after answering a read with write 1's data — so
/// reads would go back in time (write 2 failed before the read began, yet shows after it;
/// found by the off-load family, seed 8046259851208051570). When the store answers again, a
/// read of that range is not sent there until the store has answered a barrier (`metadata`,
/// answered once every earlier write of this client is settled there, those still waiting for
/// room refused); then it is, and returns what the store holds.
#[test]
fn a_read_over_a_copy_that_may_still_land_waits_for_a_barrier() {
    let mut config = Config::new(7, 1, 1 << 20);
    config.policy = Policy::Always;
    config.request_timeout_ns = Some(1_000);
    config.probe_interval_ns = 1_000;
    config.full_timeout_ns = 5_000;
    let mut c = Client::format(config.clone(), vec![StoreInfo { id: 1, server: 1 }], 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("the superblock is written first");
    };
    c.handle_base(1, BaseDone::Written { id });
    let mut held: Option<(u64, Vec<u8>)> = None;
    let mut now = 2;
    // Runs until `until`; the store silent if `silent`, else answering everything from
    // `held`. Returns the requests the store answered, in order, as text.
    let mut run = |c: &mut Client, silent: bool, until: Nanos, now: &mut Nanos| {
        let mut seen = Vec::new();
        while *now < until {
            while let Some((store, id, request)) = c.poll_store() {
                if silent {
                    continue;
                }
                seen.push(format!("{request:?}"));
                let reply = match request {
                    Request::Write { version, data, .. } => {
                        held = Some((version, data));
                        Reply::Done
                    }
                    Request::Metadata { .. } => Reply::Metadata(Vec::new()),
                    Request::Delete { .. } => Reply::Done,
                    Request::Read { client: 7, .. } => {
                        let (version, data) = held.clone().expect("a copy");
                        let extent = Extent {
                            volume: 0,
                            offset_bytes: 0,
                            length_bytes: data.len() as u64,
                            version,
                        };
                        Reply::Read(vec![(extent, data)])
                    }
                    Request::ReadAny { .. } => Reply::ReadAny(None),
                    _ => Reply::Read(Vec::new()),
                };
                c.handle_store(*now, store, id, reply, Some(0));
            }
            base_writes_done_and_next_timeout(c, now, until);
        }
        seen
    };
    write(&mut c, 1, 0);
    run(&mut c, false, 100, &mut now);
    assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
    // Write 2 over it; the store goes silent with it and is counted failed.
    write(&mut c, 2, 0);
    run(&mut c, true, 10_000, &mut now);
    assert_eq!(c.stats().store_failures, 1, "{}", c.describe());
    assert_eq!(
        c.poll_upward(),
        Some((2, UpReply::Error(ClientError::NoSpace))),
        "{}",
        c.describe()
    );
    // A read after write 2 failed; the store then answers again.
    c.handle_upward(
        now,
        3,
        Upward::Read {
            offset_bytes: 0,
            length_bytes: 4096,
        },
    );
    let seen = run(&mut c, false, 20_000, &mut now);
    let barrier = seen.iter().position(|r| r.starts_with("Metadata"));
    let read = seen
        .iter()
        .position(|r| r.contains("client: 7, offset_bytes: 0"));
    assert!(
        barrier.is_some() && read.is_some() && barrier < read,
        "the read went to the store before a barrier: {seen:?}"
    );
    // The store kept write 1 (write 2 never reached it): the read returns it.
    assert_eq!(
        c.poll_upward(),
        Some((3, UpReply::Read(vec![1; 4096]))),
        "{}",
        c.describe()
    );
    assert_eq!(c.stats().seals, 1);
}
