//! The off-load bound: in total and per store, new data goes to the base volume at it, data
//! already off-loaded is still overwritten in place, and reclaim runs near it.

use super::*;

/// A client under the always policy with `stores` stores, one copy per write, the bounds
/// given; its superblock written.
fn bounded(stores: u64, total: Option<u64>, per_store: Option<u64>) -> Client {
    let mut config = Config::new(7, 1, 1 << 20);
    config.policy = Policy::Always;
    config.offload_bytes_max = total;
    config.offload_bytes_max_per_store = per_store;
    let stores = (1..=stores)
        .map(|id| StoreInfo { id, server: id })
        .collect();
    let mut c = Client::format(config, stores, 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("the superblock is written first");
    };
    c.handle_base(1, BaseDone::Written { id });
    c
}

/// Answers every write at once (store writes done, base writes written); returns where each
/// upper-layer write offset went: `Some(store)` or `None` for the base volume, and the
/// reclaim requests seen.
fn settle(c: &mut Client, now: Nanos) -> (Vec<(u64, Option<StoreIdx>)>, usize) {
    let mut placed = Vec::new();
    let mut reclaims = 0;
    let mut progress = true;
    while std::mem::take(&mut progress) {
        while let Some((store, id, request)) = c.poll_store() {
            progress = true;
            let reply = match request {
                Request::Write { offset_bytes, .. } => {
                    placed.push((offset_bytes, Some(store)));
                    Reply::Done
                }
                Request::ReadAny { .. } | Request::Read { .. } => {
                    reclaims += 1;
                    continue;
                }
                _ => Reply::Done,
            };
            c.handle_store(now, store, id, reply, Some(0));
        }
        while let Some(op) = c.poll_base() {
            progress = true;
            if let BaseOp::Write {
                id, offset_bytes, ..
            } = op
            {
                placed.push((offset_bytes, None));
                c.handle_base(now, BaseDone::Written { id });
            }
        }
    }
    (placed, reclaims)
}

#[test]
fn at_the_total_bound_new_data_goes_to_the_base_and_off_loaded_data_is_overwritten_in_place() {
    let mut c = bounded(1, Some(8192), None);
    for (i, at) in [0u64, 4096, 8192].into_iter().enumerate() {
        write(&mut c, i as u64 + 1, at);
    }
    let (placed, first_reclaims) = settle(&mut c, 2);
    assert_eq!(
        placed,
        vec![(0, Some(0)), (4096, Some(0)), (8192, None)],
        "{}",
        c.describe()
    );
    assert_eq!(c.stats().bound_writes, 1);
    assert_eq!(c.stats().offloaded_bytes, 8192);
    // Overwriting off-loaded data adds nothing: it stays off-loaded (a newer version).
    write(&mut c, 4, 0);
    let (placed, reclaims) = settle(&mut c, 3);
    assert_eq!(placed, vec![(0, Some(0))]);
    assert_eq!(c.stats().bound_writes, 1);
    // At the bound, reclaim runs even under the always policy.
    assert!(
        first_reclaims + reclaims > 0,
        "no reclaim at the bound: {}",
        c.describe()
    );
    let answers: Vec<(u64, UpReply)> = std::iter::from_fn(|| c.poll_upward()).collect();
    assert_eq!(answers.len(), 4);
    assert!(answers.iter().all(|(_, r)| *r == UpReply::Written));
}

#[test]
fn a_store_at_its_bound_takes_no_more_and_below_n_stores_with_room_writes_go_to_the_base() {
    let mut c = bounded(2, None, Some(4096));
    for (i, at) in [0u64, 4096, 8192].into_iter().enumerate() {
        write(&mut c, i as u64 + 1, at);
    }
    let (mut placed, _) = settle(&mut c, 2);
    placed.sort();
    let stores: Vec<Option<StoreIdx>> = placed.iter().map(|&(_, s)| s).collect();
    assert_eq!(placed.len(), 3, "{placed:?}");
    assert_eq!(
        stores.iter().filter(|s| s.is_none()).count(),
        1,
        "one to the base: {placed:?}"
    );
    assert!(
        stores.contains(&Some(0)) && stores.contains(&Some(1)),
        "{placed:?}"
    );
    assert_eq!(c.stats().bound_writes, 1);
    for f in c.store_figures() {
        assert!(f.offloaded_bytes <= 4096, "{f:?}");
    }
}

#[test]
fn without_a_bound_everything_is_off_loaded_under_the_always_policy() {
    let mut c = bounded(1, None, None);
    for (i, at) in [0u64, 4096, 8192].into_iter().enumerate() {
        write(&mut c, i as u64 + 1, at);
    }
    let (placed, reclaims) = settle(&mut c, 2);
    assert!(placed.iter().all(|&(_, s)| s == Some(0)), "{placed:?}");
    assert_eq!((c.stats().bound_writes, reclaims), (0, 0));
}
