//! What Sierra's logging mode drives (§3.6): whether the base (a chunk group's replicas) takes
//! writes, the loggers' locality ranks, and a view of the writes in flight.

use super::*;

impl Client {
    /// Under [`Policy::WhileBaseUnavailable`]: whether every replica of the base takes writes
    /// now. While not, every write is off-loaded and nothing is reclaimed.
    pub fn set_base_available(&mut self, now: Nanos, available: bool) {
        self.now = now;
        self.base_available = available;
        self.pump();
    }

    pub fn base_available(&self) -> bool {
        self.base_available
    }

    /// Sets how many reclaim jobs may run at once ([`Config::n_reclaim`]) and starts what the
    /// new limit allows. Sierra's chunk server shares one budget among its groups' clients;
    /// lowering the limit below the jobs running lets them finish.
    pub fn set_reclaim_limit(&mut self, n: usize) {
        self.config.n_reclaim = n;
        self.pump_reclaim();
    }

    pub fn reclaim_limit(&self) -> usize {
        self.config.n_reclaim
    }

    pub fn reclaim_jobs(&self) -> usize {
        self.reclaim_jobs
    }

    /// Whether reclaim of vulnerable data is queued or under way: a server
    /// sharing one reclaim budget among clients gives none to the others' other data meanwhile.
    pub fn reclaiming_vulnerable(&self) -> bool {
        self.base_available
            && self.is_ready()
            && (!self.vulnerable.is_empty() || self.vulnerable_jobs > 0)
    }

    /// Whether reclaim has work it could start now, and whether some of it is at risk (held
    /// by fewer than N stores up).
    pub fn reclaim_wanted(&self) -> Option<bool> {
        if !self.base_available || !self.is_ready() {
            return None;
        }
        if !self.vulnerable.is_empty() {
            return Some(true);
        }
        if self.vulnerable_jobs > 0 || !self.reclaims() {
            // Other data waits until the vulnerable data is on the base volume.
            return None;
        }
        self.stores
            .iter()
            .any(|st| {
                st.up
                    && st.may_hold
                    && st.reclaim_after <= self.now
                    && st.any_in_flight < st.any_window
            })
            .then_some(false)
    }

    /// Orders stores by preference before load: `rank` of a store's id, lower first (Sierra's
    /// loggers: on a replica's server, then in a replica's rack, then elsewhere). Copies of a
    /// write still go to stores of distinct [`StoreInfo::server`]s (Sierra: racks).
    pub fn set_store_ranks(&mut self, ranks: impl IntoIterator<Item = (u64, u8)>) {
        self.store_rank = ranks.into_iter().collect();
    }

    /// The order in which stores are preferred: rank, then load.
    pub(super) fn store_preference(&self, s: StoreIdx) -> (u8, u64, StoreIdx) {
        let rank = self
            .store_rank
            .get(&self.stores[s].info.id)
            .copied()
            .unwrap_or(0);
        (rank, self.store_load(s), s)
    }

    /// Whether reclaim may run under the policy: Everest's peak policy, or Sierra's logging
    /// mode with every replica available.
    pub(super) fn reclaims(&self) -> bool {
        match self.config.policy {
            Policy::Peak => true,
            Policy::WhileBaseUnavailable => self.base_available,
            Policy::Baseline | Policy::Always => false,
        }
    }

    /// Requests in flight on the base volume (ours plus what the driver reports).
    /// The off-loaded writes in flight: (start, length, version, stores waited for, succeeded,
    /// tried), for diagnostics.
    pub fn writes_in_flight(&self) -> Vec<(u64, u64, u64, u32, u64, u64)> {
        let mut writes: Vec<_> = self
            .writes
            .values()
            .map(|op| {
                (
                    op.start,
                    op.data.len() as u64,
                    op.version,
                    op.waiting,
                    op.succeeded,
                    op.tried,
                )
            })
            .collect();
        writes.sort_unstable();
        writes
    }
}
