//! The always policy's check: seconds after the last fault, what a failed store left with
//! fewer than N copies is on the base volume and the superblock's "degraded" mark is cleared
//! (Everest §3.4: the at-risk data is reclaimed first, under any policy).

use super::*;

/// Under the always policy, when the at-risk data must be on the base volume and the
/// policy turns to peak ([`Shape::always`]). A write's missing copies time out
/// [`COPIES_TIMEOUT_NS`] after the client learns a store failed — which may be seconds after
/// the load, once a restarted client is ready again and its first writes meet the store —
/// and a range it left short is reclaimed then.
pub(super) const ALWAYS_CHECK_AT: Nanos = SWEEP_AT + 1_500_000_000;
/// The clients' `copies_timeout_ns`, the core's default: at most this long after a store is
/// found down, a write still waiting for a copy there is answered and its copies enter the
/// range map (and the at-risk queue). A client that restarted during the load and learned of
/// the always policy's failed store only at 4.5 s left writes waiting until after
/// [`ALWAYS_CHECK_AT`] — the older data they overwrite still short of N copies then, with
/// nothing wrong (seeds 4068236291422288793, 4068236291422309013). Schedules under the always
/// policy keep it; half the others time copies out after 1 s (`Shape::copies_timeout_ns`).
pub(super) const COPIES_TIMEOUT_NS: Nanos = 5_000_000_000;
/// How long after a store is found down the always policy's check gives the client to put
/// what the failure left short on the base volume: a write's bound, then its reclaim. A
/// stalled link may fail a store moments before the check (seed 4068236291422270369: 0.2 s
/// before, 28 ranges queued and being reclaimed); such a store's copies are counted as if it
/// were up.
pub(super) const AT_RISK_GRACE_NS: Nanos = COPIES_TIMEOUT_NS + 1_000_000_000;
/// How long after a write fails (its copies' bound, `copies_timeout_ns`) the check gives the
/// client to reclaim what it left short: its range has entered the map and the at-risk queue,
/// and its reclaim reads may meet a stalled link. Seeds 8898799020059258882 and
/// 8898799020059260421: a restarted client learned of the failed store only at 4.3 s and
/// 4.2 s, its writes failed 0.15 s and 0.29 s before the check, and their reclaims, under way,
/// ended at 9.66 s and 9.64 s.
pub(super) const RECLAIM_GRACE_NS: Nanos = 1_000_000_000;

impl ClientSide {
    /// Notes a write that failed (its range, when): the check leaves its range to the
    /// reclaim for [`RECLAIM_GRACE_NS`]. Keeps only the failures that recent.
    pub(super) fn write_failed(&mut self, now: Nanos, start: u64, end: u64) {
        self.failed_writes
            .retain(|&(.., t)| now < t + RECLAIM_GRACE_NS);
        self.failed_writes.push((start, end, now));
    }

    /// Seconds after the last fault, under `--policy always`: every range with fewer than N
    /// copies on stores that are up and at least one there is on the base volume (reclaimed
    /// first, under any policy), and once no range has fewer than N, the superblock's
    /// "degraded" mark is cleared. A failure goes into the model's violations.
    pub(super) fn at_risk_reclaimed(&mut self, now: Nanos) {
        if !self.client.is_ready() {
            // Restarted "degraded", it waits for every store (the one still down among them).
            return;
        }
        let n = self.client.config().n_way;
        let stores = self.client.stores();
        let up = stores
            .iter()
            .filter(|(_, _, up)| *up)
            .fold(0u64, |mask, (i, _, _)| mask | 1 << i);
        // Stores found down within the grace: their copies still count (see AT_RISK_GRACE_NS).
        let counted = stores
            .iter()
            .filter(|(i, _, up)| {
                *up || self
                    .client
                    .store_down_since(*i)
                    .is_some_and(|t| now < t + AT_RISK_GRACE_NS)
            })
            .fold(0u64, |mask, (i, _, _)| mask | 1 << i);
        let short =
            |l: &Loc, mask: u64| !l.on_base && ((l.stores & mask).count_ones() as usize) < n;
        // A range under an off-loaded write in flight cannot be read back for reclaim (the
        // stores answer with the newer version) until that write ends and enters the map or
        // fails: it is that write's business (bounded by `copies_timeout_ns`).
        let in_flight: Vec<(u64, u64)> = self
            .client
            .writes_in_flight()
            .iter()
            .map(|&(start, len, ..)| (start, start + len))
            .collect();
        // A range under a write that failed less than RECLAIM_GRACE_NS ago: being reclaimed.
        let failed = &self.failed_writes;
        let under_write = |lo: u64, hi: u64| {
            in_flight.iter().any(|&(a, b)| a < hi && lo < b)
                || failed
                    .iter()
                    .any(|&(a, b, t)| a < hi && lo < b && now < t + RECLAIM_GRACE_NS)
        };
        let stranded: Vec<(u64, u64, Loc)> = self
            .client
            .ranges()
            .filter(|(lo, hi, l)| short(l, counted) && l.stores & up != 0 && !under_write(*lo, *hi))
            .map(|(lo, hi, l)| (lo, hi, *l))
            .collect();
        let any_short = self.client.ranges().any(|(_, _, l)| short(l, up));
        // The mark is cleared at most a probe interval after the last short range left, by a
        // superblock write: a write that failed within the grace may have left a range short
        // whose reclaim just ended (seed 2619736187319134240, under one order of the copies'
        // timeouts: two writes failed 32 ms before the check, their reclaim ended 19 ms before
        // it, and the mark was cleared 30 ms after it).
        let recent_failure = failed.iter().any(|&(.., t)| now < t + RECLAIM_GRACE_NS);
        let describe = self.client.describe();
        let degraded = describe.contains("(degraded");
        if !stranded.is_empty() || (degraded && !any_short && !recent_failure) {
            self.model.borrow_mut().violations.push(format!(
                "client {} at {now} ns under the always policy: {} range(s) with fewer than {n} copies left unreclaimed (first {:?}, stores up {up:#b}), degraded {degraded}; client: {describe}",
                self.index,
                stranded.len(),
                stranded.iter().take(4).collect::<Vec<_>>(),
            ));
        }
    }
}
