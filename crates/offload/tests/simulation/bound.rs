//! The off-load bound (`--offload-bytes-max`, `--offload-bytes-max-per-store`, Everest §4.2's
//! remedy for the worst case): a third of the fresh schedules bound what each client keeps
//! off-loaded, and after every event the range map must not have grown past either bound.

use super::*;

impl ClientSide {
    /// The off-load bound holds after every event: the bytes the range map holds off the base
    /// volume, walked here, in total and per store, never grow past the client's bounds. (A
    /// restart may find more: copies reclaimed whose deletes were not sent yet come back as
    /// off-loaded data, reclaimed again.)
    pub(super) fn check_bound(&mut self, now: Nanos) {
        let config = self.client.config();
        let (total_max, per_max) = (config.offload_bytes_max, config.offload_bytes_max_per_store);
        if (total_max.is_none() && per_max.is_none()) || !self.client.is_ready() {
            return;
        }
        let (mut total, mut per) = (0, [0u64; 64]);
        for (lo, hi, l) in self.client.ranges().filter(|(_, _, l)| !l.on_base) {
            total += hi - lo;
            for (s, held) in per.iter_mut().enumerate() {
                if l.stores & 1 << s != 0 {
                    *held += hi - lo;
                }
            }
        }
        let busiest = per.iter().copied().max().unwrap_or(0);
        let Some((total_before, per_before)) = self.bound_seen.replace((total, per)) else {
            return;
        };
        let grew_past =
            |now: u64, before: u64, max: Option<u64>| max.is_some_and(|m| now > m && now > before);
        if grew_past(total, total_before, total_max)
            || (0..64).any(|s| grew_past(per[s], per_before[s], per_max))
        {
            self.model.borrow_mut().violations.push(format!(
                "client {} at {now} ns: {total} bytes off-loaded (bound {total_max:?}), {busiest} on one store (bound {per_max:?}); client: {}",
                self.index,
                self.client.describe()
            ));
        }
    }
}
