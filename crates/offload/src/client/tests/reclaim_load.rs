//! Reclaim and the stores' load (Everest §3.2.3: "each lightly-loaded store returns valid
//! data"): a quiet base volume reclaims from a store on an idle disk at up to N_reclaim
//! read_any at once; beside a busy volume, its reads and the volume's operations stay under
//! T_store; beside a volume at T_store, one read_any at a time.

use super::*;

const PAGES: u64 = 64;

/// A peak-policy client whose base volume was busy while `PAGES` 4 KiB writes came: all of them
/// off-loaded to its one store. The base volume is quiet again when this returns.
fn off_loaded_client() -> Client {
    let mut c = ready(Policy::Peak);
    c.set_external_base_load(100);
    for page in 0..PAGES {
        write(&mut c, page + 1, page * 4096);
        answer(&mut c, Reply::Done);
        assert_eq!(c.poll_upward(), Some((page + 1, UpReply::Written)));
    }
    assert_eq!(c.stats().offloaded_writes, PAGES);
    c.set_external_base_load(0);
    c
}

/// Runs reclaim until every page is on the base volume, the store reporting its own requests
/// as its load and `others` operations of the volume beside it on its disk; returns the most
/// read_any this client had in flight at once.
fn reclaim_all(c: &mut Client, others: u64) -> usize {
    let mut left: Vec<(u64, u64, Loc)> = c.ranges().map(|(lo, hi, l)| (lo, hi, *l)).collect();
    let mut in_flight: Vec<u64> = Vec::new();
    let mut most = 0;
    let mut now = 1_000_000_000;
    c.handle_volume_load(0, others);
    for _ in 0..10_000 {
        if c.ranges().next().is_none() {
            return most;
        }
        now += 1_000_000;
        c.handle_timeout(now);
        // The store takes every request sent (deletes answered at once) and the base volume
        // every reclaim write, until neither has anything new.
        let mut progress = true;
        while std::mem::take(&mut progress) {
            while let Some((_, id, request)) = c.poll_store() {
                progress = true;
                match request {
                    Request::ReadAny { .. } => in_flight.push(id),
                    Request::Delete { .. } => {
                        let load = in_flight.len() as u64;
                        c.handle_volume_load(0, others);
                        c.handle_store(now, 0, id, Reply::Done, Some(load));
                    }
                    other => panic!("only reclaim is asked of the store: {other:?}"),
                }
            }
            while let Some(op) = c.poll_base() {
                progress = true;
                if let BaseOp::Write { id, .. } = op {
                    c.handle_base(now, BaseDone::Written { id });
                }
            }
        }
        most = most.max(in_flight.len());
        // The store answers the oldest read_any with the next page it holds; the load it
        // reports counts this client's requests still in flight.
        if !in_flight.is_empty() {
            let id = in_flight.remove(0);
            let piece = left.pop().map(|(lo, hi, l)| {
                let extent = Extent {
                    volume: 1,
                    offset_bytes: lo,
                    length_bytes: hi - lo,
                    version: l.version,
                };
                (extent, vec![0xab; (hi - lo) as usize])
            });
            let load = in_flight.len() as u64;
            c.handle_volume_load(0, others);
            c.handle_store(now, 0, id, Reply::ReadAny(piece), Some(load));
        }
    }
    panic!("reclaim did not finish: {}", c.describe());
}

#[test]
fn a_quiet_base_volume_reclaims_from_an_idle_store_many_at_a_time() {
    let mut c = off_loaded_client();
    let most = reclaim_all(&mut c, 0);
    assert!(
        most >= 8,
        "an idle store is asked many read_any at once (the window grows): {most}"
    );
}

#[test]
fn a_store_whose_volume_is_busy_is_asked_one_read_any_at_a_time() {
    let mut c = off_loaded_client();
    let t_store = c.config.t_store;
    let most = reclaim_all(&mut c, t_store);
    assert_eq!(
        most, 1,
        "a store whose disk's volume is at T_store gets one read_any at a time"
    );
}

#[test]
fn reclaim_reads_and_a_busy_volume_beside_the_store_stay_under_t_store() {
    let mut c = off_loaded_client();
    let t_store = c.config.t_store;
    let most = reclaim_all(&mut c, t_store / 2);
    assert!(
        most > 1 && most as u64 + t_store / 2 <= t_store,
        "{most} read_any in flight beside a volume at {} of T_store {t_store}",
        t_store / 2
    );
}
