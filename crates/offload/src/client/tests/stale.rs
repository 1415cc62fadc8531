//! Deletes of stale copies: a delete that may not go as a whole goes in the parts that may.

use super::*;

/// Store 0 holds write 2 over two blocks, and write 1 of the first block is still in flight
/// to it; writes 3 and 4 (on store 1) supersede write 2 block by block, so store 0 owes one
/// stale range of write 2 over both. Deleting it whole would remove write 1's copy if it lands
/// (a write in flight counts on it: invariant 1), but the second block holds nothing else:
/// its delete goes now. A delete allowed only whole waits, and two stores in that position
/// over each other's blocks would wait on each other for ever.
#[test]
fn a_stale_range_refused_whole_is_deleted_in_the_parts_that_may_go() {
    let mut config = Config::new(7, 1, 1 << 20);
    config.policy = Policy::Always;
    let stores = vec![
        StoreInfo { id: 1, server: 1 },
        StoreInfo { id: 2, server: 2 },
    ];
    let mut c = Client::format(config, stores, 0);
    let Some(BaseOp::Write { id, .. }) = c.poll_base() else {
        panic!("the superblock is written first");
    };
    c.handle_base(1, BaseDone::Written { id });
    let sent = |c: &mut Client, up_id: u64, offset_bytes: u64, blocks: usize| {
        c.handle_upward(
            2,
            up_id,
            Upward::Write {
                offset_bytes,
                data: vec![up_id as u8; 4096 * blocks],
                durable: false,
            },
        );
        let Some((store, id, Request::Write { version, .. })) = c.poll_store() else {
            panic!("write {up_id} goes to a store");
        };
        (store, id, version)
    };

    // Writes 1 and 2 to store 0 (store 1 looks busy); write 1 stays unanswered.
    c.handle_load(1, 10);
    let (store, _, _) = sent(&mut c, 1, 0, 1);
    assert_eq!(store, 0);
    let (store, id, version) = sent(&mut c, 2, 0, 2);
    assert_eq!(store, 0);
    c.handle_store(3, store, id, Reply::Done, Some(0));
    assert_eq!(c.poll_upward(), Some((2, UpReply::Written)));

    // Writes 3 and 4, one block each, to store 1 (store 0 looks busy now).
    c.handle_load(0, 10);
    c.handle_load(1, 0);
    let mut deletes = Vec::new();
    for (up_id, offset_bytes) in [(3, 0), (4, 4096)] {
        let (store, id, _) = sent(&mut c, up_id, offset_bytes, 1);
        assert_eq!(store, 1);
        c.handle_store(4, store, id, Reply::Done, Some(0));
        assert_eq!(c.poll_upward(), Some((up_id, UpReply::Written)));
        deletes.extend(std::iter::from_fn(|| c.poll_store()));
    }
    let deletes: Vec<(StoreIdx, u64, u64, u64)> = deletes
        .into_iter()
        .map(|(store, _, request)| match request {
            Request::Delete {
                offset_bytes,
                length_bytes,
                version,
                ..
            } => (store, offset_bytes, length_bytes, version),
            other => panic!("only deletes are owed: {other:?}"),
        })
        .collect();
    assert_eq!(
        deletes,
        vec![(0, 4096, 4096, version)],
        "write 2's stale copy of the second block is deleted from store 0, the first block's \
         waits for write 1: {}",
        c.describe()
    );
}
