//! Reclaim and the upper layer's base writes in flight: a disk may complete two overlapping
//! writes in either order, so a reclaim write never goes to the base volume over an older
//! upper-layer write still in flight there (the simulated disks reorder them too; this test
//! reaches the window in every run, where the schedules reach it in some).

use super::*;

/// Write 1 goes to the quiet base volume and stays in flight; the base gets busy and write 2
/// of the same block is off-loaded and acknowledged; the base is quiet again and the store
/// offers write 2 to reclaim. No reclaim write reaches the base volume until write 1 is done;
/// then write 2's bytes do, and the block reads from the base.
#[test]
fn no_reclaim_write_goes_over_an_older_base_write_in_flight() {
    let mut c = ready(Policy::Peak);
    write(&mut c, 1, 0);
    let Some(BaseOp::Write {
        id: first,
        offset_bytes: 0,
        ..
    }) = c.poll_base()
    else {
        panic!("a quiet base volume takes write 1");
    };
    c.set_external_base_load(100);
    write(&mut c, 2, 0);
    answer(&mut c, Reply::Done);
    assert_eq!(c.poll_upward(), Some((2, UpReply::Written)));
    let version = c.ranges().next().expect("write 2 is off-loaded").2.version;
    c.set_external_base_load(0);

    let mut now = 1_000_000_000;
    let mut first = Some(first);
    let mut reclaimed = false;
    for _ in 0..1_000 {
        if c.ranges().next().is_none_or(|(_, _, l)| l.on_base) && first.is_none() {
            break;
        }
        now += 1_000_000;
        c.handle_timeout(now);
        while let Some((store, id, request)) = c.poll_store() {
            let reply = match request {
                Request::ReadAny { .. } if !reclaimed => {
                    let extent = Extent {
                        volume: 1,
                        offset_bytes: 0,
                        length_bytes: 4096,
                        version,
                    };
                    Reply::ReadAny(Some((extent, vec![2; 4096])))
                }
                Request::ReadAny { .. } => Reply::ReadAny(None),
                Request::Delete { .. } => Reply::Done,
                other => panic!("only reclaim is asked of the store: {other:?}"),
            };
            c.handle_store(now, store, id, reply, Some(0));
        }
        while let Some(op) = c.poll_base() {
            let BaseOp::Write {
                id,
                offset_bytes,
                data,
                ..
            } = op
            else {
                panic!("only writes go to the base volume: {op:?}");
            };
            assert!(
                first.is_none(),
                "a reclaim write of {} bytes at {offset_bytes} went to the base volume while \
                 the older write 1 to the same block was in flight there",
                data.len()
            );
            assert_eq!((offset_bytes, data), (0, vec![2; 4096]));
            reclaimed = true;
            c.handle_base(now, BaseDone::Written { id });
        }
        // Write 1 completes only after the store has offered write 2 for a while.
        if let Some(id) = first.filter(|_| now >= 1_100_000_000) {
            c.handle_base(now, BaseDone::Written { id });
            first = None;
        }
    }
    assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
    assert!(reclaimed, "write 2 was never reclaimed: {}", c.describe());
    assert!(
        c.ranges().all(|(_, _, l)| l.on_base),
        "the block still reads from the store: {}",
        c.describe()
    );
}
