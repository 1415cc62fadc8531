//! The client's deadlines. [`Client::poll_timeout`] reports the earliest of them
//! (`next_deadline`); `timeout_step` acts on those passed, and the pump picks up the rest.
//!
//! | deadline | due at | then |
//! |---|---|---|
//! | a store's silence | its last answer (or since it was busy) + `request_timeout_ns`, while requests are outstanding there | the store counts as failed (while recovering: its requests are given up) |
//! | a probe | a down store's `next_probe`, once ready | a one-byte read to see whether it is back |
//! | removal | a down store's `down_since` + `remove_after_ns` | the store leaves the set |
//! | a fetch retry | recovery's `retry_at` per store | the store's ranges asked again |
//! | recovery's grace | the fetch's start + `recovery_grace_ns`, while some fetch failed | failed fetches decide whether recovery goes on without them |
//! | parked writes | `parked_retry_at` (full stores) | parked writes placed again |
//! | a superblock write | `superblock_retry_at` | written again |
//! | at-risk reclaim | `vulnerable_retry_at` | failed at-risk reclaims queued again |
//! | a write's bound | its `write_deadline`: `copies_timeout_ns` after a round with fewer than N copies, else `full_timeout_ns` after it arrived | answered with ENOSPC (no copy) or EIO (fewer than N) |
//! | the degraded mark | `degraded_check_at`, while degraded with nothing at risk | the mark cleared when safe |
//! | reclaim | a store's `reclaim_after`, while reclaim may run | reclaim from it may start |
//! | deletion records | a down store's `record_after`, while it holds stale copies | deletion records written elsewhere |
//! | a barrier | a store's `seal_after` (one refused), while up with unsealed ranges | the barrier sent again |

use super::*;

impl Client {
    /// The earliest deadline of the table above (none for a client with nothing to wait for).
    pub(super) fn next_deadline(&self) -> Option<Nanos> {
        let mut at: Option<Nanos> = None;
        let mut consider = |t: Nanos| at = Some(at.map_or(t, |a| a.min(t)));
        for s in 0..self.stores.len() {
            if let Some(t) = self.silence_deadline(s) {
                consider(t);
            }
        }
        for s in &self.stores {
            if !s.up && !s.removed {
                if !s.probing && matches!(self.phase, Phase::Ready) {
                    consider(s.next_probe);
                }
                if let Some(after) = self.config.remove_after_ns {
                    consider(s.down_since + after);
                }
            }
        }
        if let Phase::Fetching(f) = &self.phase {
            for t in f.retry_at.iter().flatten() {
                consider(*t);
            }
            // Past it, failed fetches (retried every probe interval) decide.
            let graced = f.started + self.config.recovery_grace_ns;
            if graced > self.now && f.failed.iter().any(|&x| x) {
                consider(graced);
            }
        }
        if let Some(t) = self.parked_retry_at {
            consider(t);
        }
        for t in [self.superblock_retry_at, self.vulnerable_retry_at]
            .into_iter()
            .flatten()
        {
            consider(t);
        }
        for op in self.writes.values() {
            if let Some(t) = self.write_deadline(op) {
                consider(t);
            }
        }
        if self.degraded
            && self.vulnerable.is_empty()
            && self.held_writes.is_empty()
            && self.is_ready()
        {
            consider(self.degraded_check_at);
        }
        if self.reclaims_others() && self.is_ready() {
            for s in &self.stores {
                if s.up && s.may_hold && s.reclaim_after > self.now {
                    consider(s.reclaim_after);
                }
            }
        }
        for s in &self.stores {
            if !s.up && !s.removed && s.record_after > self.now && !s.stale.is_empty() {
                consider(s.record_after);
            }
            // Reads parked on the barrier wait for it. (In the one case examined, a unit test of a
            // refused barrier, a retry of at-risk reclaim was due as early; this does not rely
            // on that.)
            let barrier_due = s.up && !s.removed && !s.seal_in_flight && !s.unsealed.is_empty();
            if barrier_due && s.seal_after > self.now {
                consider(s.seal_after);
            }
        }
        at
    }

    pub(super) fn timeout_step(&mut self, now: Nanos) {
        self.now = now;
        if self.parked_retry_at.is_some_and(|t| t <= now) {
            self.retry_parked_writes();
        }
        self.answer_late_writes();
        if self.superblock_retry_at.is_some_and(|t| t <= now) {
            self.retry_superblock();
        }
        if self.vulnerable_retry_at.is_some_and(|t| t <= now) {
            self.vulnerable_retry_at = None;
            let retry = std::mem::take(&mut self.vulnerable_retry);
            self.vulnerable.extend(retry);
        }
        for store in 0..self.stores.len() {
            if self.silence_deadline(store).is_none_or(|t| t > now) {
                continue;
            }
            if matches!(self.phase, Phase::Ready) && self.stores[store].up {
                self.store_failed(store);
            } else {
                // Not serving (down, or the client is recovering): give up what is outstanding.
                self.fail_outstanding(store);
            }
        }
        for s in 0..self.stores.len() {
            let st = &self.stores[s];
            if st.up || st.removed {
                continue;
            }
            if let Some(after) = self.config.remove_after_ns {
                if now >= st.down_since + after {
                    self.remove_store_step(now, s);
                    continue;
                }
            }
            let st = &mut self.stores[s];
            if matches!(self.phase, Phase::Ready) && !st.probing && now >= st.next_probe {
                st.probing = true;
                st.next_probe = now + self.config.probe_interval_ns;
                self.send(
                    s,
                    Request::Read {
                        client: PROBE_CLIENT,
                        offset_bytes: 0,
                        length_bytes: 1,
                    },
                    Pending::Probe,
                );
            }
        }
        if let Phase::Fetching(f) = &mut self.phase {
            let due: Vec<StoreIdx> = (0..f.retry_at.len())
                .filter(|&s| f.retry_at[s].is_some_and(|t| t <= now))
                .collect();
            for s in due {
                if let Phase::Fetching(f) = &mut self.phase {
                    f.retry_at[s] = None;
                }
                self.fetch_from(s);
            }
            self.maybe_finish_fetch();
        }
        self.pump();
    }
}
