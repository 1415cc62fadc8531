//! A read over data partly on the base and partly on a store: one request per place for each
//! run of pieces, the right bytes whatever order the answers come in.

use super::*;
use crate::client::reads::READ_GAP_BYTES;

const BLOCK: u64 = 4096;

/// A client whose odd blocks 1, 3 and 5 are off-loaded (written with their number as the fill
/// byte); the even blocks are on the base. Returns it with each odd block's version.
fn odd_blocks_offloaded() -> (Client, Vec<(u64, u64)>) {
    let mut c = ready(Policy::Always);
    for k in [1u64, 3, 5] {
        write(&mut c, k, k * BLOCK);
        answer(&mut c, Reply::Done);
        assert_eq!(c.poll_upward(), Some((k, UpReply::Written)));
    }
    let versions: Vec<(u64, u64)> = c.ranges().map(|(s, _, l)| (s, l.version)).collect();
    assert_eq!(
        versions.iter().map(|&(s, _)| s / BLOCK).collect::<Vec<_>>(),
        [1, 3, 5]
    );
    (c, versions)
}

/// The store's answer: each odd block's copy, and an older copy of block 2 (now on the base:
/// the store keeps it until its deletion is done), which the read must not take.
fn store_answer(versions: &[(u64, u64)]) -> Reply {
    let mut pieces: Vec<Piece> = versions
        .iter()
        .map(|&(start, version)| {
            let e = Extent {
                volume: 7,
                offset_bytes: start,
                length_bytes: BLOCK,
                version,
            };
            (e, vec![(start / BLOCK) as u8; BLOCK as usize])
        })
        .collect();
    let stale = Extent {
        volume: 7,
        offset_bytes: 2 * BLOCK,
        length_bytes: BLOCK,
        version: 1,
    };
    pieces.insert(1, (stale, vec![0x77; BLOCK as usize]));
    Reply::Read(pieces)
}

/// What the read of blocks 0..7 returns: the base's bytes (0xEE) on even blocks, the store's
/// on odd ones.
fn expected() -> Vec<u8> {
    (0..7u64)
        .flat_map(|k| {
            let fill = if k % 2 == 1 { k as u8 } else { 0xEE };
            vec![fill; BLOCK as usize]
        })
        .collect()
}

/// Blocks 0..7 alternate between the base and the store: the read is one base read of blocks
/// 0..7 (keeping the even ones) and one store read of blocks 1..6 (taking the odd ones), in
/// place of seven requests; answered base first (its buffer becomes the read's, the store's
/// blocks land over it) or store first (only the kept spans of the base's bytes are copied),
/// the read returns the same bytes, and never the store's older copy of block 2.
#[test]
fn a_read_over_alternating_pieces_is_one_request_per_place() {
    for base_first in [true, false] {
        let (mut c, versions) = odd_blocks_offloaded();
        let before = (c.stats().base_reads, c.stats().store_reads);
        c.handle_upward(
            10,
            20,
            Upward::Read {
                offset_bytes: 0,
                length_bytes: 7 * BLOCK,
            },
        );
        let bases: Vec<BaseOp> = std::iter::from_fn(|| c.poll_base()).collect();
        let stores: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
        assert_eq!(bases.len(), 1, "{bases:?}");
        assert_eq!(stores.len(), 1, "{stores:?}");
        let BaseOp::Read {
            id: base_id,
            offset_bytes: 0,
            length_bytes,
        } = bases[0]
        else {
            panic!("a base read from 0: {:?}", bases[0]);
        };
        assert_eq!(length_bytes, 7 * BLOCK, "the base read spans the read");
        let (store, store_id, request) = &stores[0];
        assert!(
            matches!(
                request,
                Request::Read {
                    offset_bytes,
                    length_bytes,
                    ..
                } if *offset_bytes == BLOCK && *length_bytes == 5 * BLOCK
            ),
            "the store read spans blocks 1..6: {request:?}"
        );
        assert_eq!(
            (c.stats().base_reads, c.stats().store_reads),
            (before.0 + 1, before.1 + 1)
        );
        let base = |c: &mut Client| {
            let data = vec![0xEE; (7 * BLOCK) as usize];
            c.handle_base(11, BaseDone::Read { id: base_id, data });
        };
        let from_store = |c: &mut Client| {
            c.handle_store(12, *store, *store_id, store_answer(&versions), Some(0))
        };
        if base_first {
            base(&mut c);
            assert_eq!(c.poll_upward(), None, "the store's pieces are owed");
            from_store(&mut c);
        } else {
            from_store(&mut c);
            assert_eq!(c.poll_upward(), None, "the base's pieces are owed");
            base(&mut c);
        }
        assert_eq!(
            c.poll_upward(),
            Some((20, UpReply::Read(expected()))),
            "base first: {base_first}"
        );
        assert!(c.poll_base().is_none() && c.poll_store().is_none());
    }
}

/// Pieces farther apart than `READ_GAP_BYTES` are not read as one: the bytes between would
/// cost more than a request.
#[test]
fn pieces_far_apart_are_separate_requests() {
    let mut c = ready(Policy::Always);
    let far = READ_GAP_BYTES + 2 * BLOCK;
    for (up_id, at) in [(1, 0), (2, far)] {
        write(&mut c, up_id, at);
        answer(&mut c, Reply::Done);
        assert_eq!(c.poll_upward(), Some((up_id, UpReply::Written)));
    }
    c.handle_upward(
        10,
        20,
        Upward::Read {
            offset_bytes: 0,
            length_bytes: far + BLOCK,
        },
    );
    let bases: Vec<BaseOp> = std::iter::from_fn(|| c.poll_base()).collect();
    let stores: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
    // The base holds one run between the two blocks; the store's two blocks are too far apart.
    assert_eq!(bases.len(), 1, "{bases:?}");
    assert_eq!(stores.len(), 2, "{stores:?}");
}

/// A read of blocks 0..16 whose first block is on the store: the base read covers the whole
/// range (block 0 too, at most a sixteenth more) so that its buffer becomes the read's; the
/// store's block lands over the base's stale bytes whichever answer comes first.
#[test]
fn a_base_read_reaches_the_end_of_the_range_and_the_store_piece_wins() {
    for base_first in [true, false] {
        let mut c = ready(Policy::Always);
        write(&mut c, 1, 0);
        answer(&mut c, Reply::Done);
        assert_eq!(c.poll_upward(), Some((1, UpReply::Written)));
        let version = c.ranges().next().expect("block 0 off-loaded").2.version;
        c.handle_upward(
            10,
            20,
            Upward::Read {
                offset_bytes: 0,
                length_bytes: 16 * BLOCK,
            },
        );
        let bases: Vec<BaseOp> = std::iter::from_fn(|| c.poll_base()).collect();
        let stores: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
        assert_eq!(
            bases.len(),
            1,
            "one base read: {bases:?} (base first: {base_first})"
        );
        let BaseOp::Read {
            id: base_id,
            offset_bytes: 0,
            length_bytes,
        } = bases[0]
        else {
            panic!("a base read from 0: {:?}", bases[0]);
        };
        assert_eq!(length_bytes, 16 * BLOCK, "the base read covers the range");
        assert_eq!(stores.len(), 1, "{stores:?}");
        let (store, store_id, _) = &stores[0];
        let base = |c: &mut Client| {
            let data = vec![0xEE; (16 * BLOCK) as usize];
            c.handle_base(11, BaseDone::Read { id: base_id, data });
        };
        let from_store = |c: &mut Client| {
            let e = Extent {
                volume: 7,
                offset_bytes: 0,
                length_bytes: BLOCK,
                version,
            };
            let reply = Reply::Read(vec![(e, vec![0x11; BLOCK as usize])]);
            c.handle_store(12, *store, *store_id, reply, Some(0))
        };
        if base_first {
            base(&mut c);
            from_store(&mut c);
        } else {
            from_store(&mut c);
            base(&mut c);
        }
        let mut want = vec![0x11; BLOCK as usize];
        want.extend(vec![0xEE; (15 * BLOCK) as usize]);
        assert_eq!(
            c.poll_upward(),
            Some((20, UpReply::Read(want))),
            "base first: {base_first}"
        );
    }
}

/// A read of blocks 0..64 with block 0 and blocks 2..40 on the store: two base runs (block
/// 1, blocks 40..64; 152 KiB apart), the first read from block 0 (the range's start, within
/// a sixteenth). Answered store first, then the second run, then the first: the first run's
/// bytes of block 0 are stale and must not land over the store's.
#[test]
fn an_extended_base_run_keeps_only_its_own_pieces() {
    let mut c = ready(Policy::Always);
    let offloaded: Vec<u64> = std::iter::once(0).chain(2..40).collect();
    for &k in &offloaded {
        write(&mut c, 100 + k, k * BLOCK);
        answer(&mut c, Reply::Done);
        assert_eq!(c.poll_upward(), Some((100 + k, UpReply::Written)));
    }
    let versions: Vec<(u64, u64)> = c.ranges().map(|(s, _, l)| (s, l.version)).collect();
    c.handle_upward(
        10,
        20,
        Upward::Read {
            offset_bytes: 0,
            length_bytes: 64 * BLOCK,
        },
    );
    let mut bases: Vec<BaseOp> = std::iter::from_fn(|| c.poll_base()).collect();
    let stores: Vec<_> = std::iter::from_fn(|| c.poll_store()).collect();
    bases.sort_by_key(|b| match b {
        BaseOp::Read { offset_bytes, .. } => *offset_bytes,
        _ => u64::MAX,
    });
    let runs: Vec<(u64, u64, u64)> = bases
        .iter()
        .map(|b| match b {
            BaseOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } => (*id, *offset_bytes / BLOCK, *length_bytes / BLOCK),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        runs.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>(),
        [(0, 2), (40, 24)],
        "block 1's run reaches the range's start"
    );
    assert_eq!(stores.len(), 1, "{stores:?}");
    let (store, store_id, _) = &stores[0];
    let pieces: Vec<Piece> = versions
        .iter()
        .map(|&(start, version)| {
            let e = Extent {
                volume: 7,
                offset_bytes: start,
                length_bytes: BLOCK,
                version,
            };
            (e, vec![(100 + start / BLOCK) as u8; BLOCK as usize])
        })
        .collect();
    c.handle_store(12, *store, *store_id, Reply::Read(pieces), Some(0));
    for &(id, _, blocks) in runs.iter().rev() {
        let data = vec![0xEE; (blocks * BLOCK) as usize];
        c.handle_base(13, BaseDone::Read { id, data });
    }
    let want: Vec<u8> = (0..64u64)
        .flat_map(|k| {
            let fill = if offloaded.contains(&k) {
                (100 + k) as u8
            } else {
                0xEE
            };
            vec![fill; BLOCK as usize]
        })
        .collect();
    let Some((20, UpReply::Read(got))) = c.poll_upward() else {
        panic!("the read is answered");
    };
    let wrong: Vec<u64> = (0..64u64)
        .filter(|&k| {
            let at = (k * BLOCK) as usize;
            got[at..at + BLOCK as usize] != want[at..at + BLOCK as usize]
        })
        .collect();
    assert!(wrong.is_empty(), "blocks with the wrong bytes: {wrong:?}");
}
