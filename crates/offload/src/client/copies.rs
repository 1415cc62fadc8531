//! The copies of an off-loaded write in flight: sending them to the chosen stores, their
//! answers, placing the missing ones, giving up on them after `copies_timeout_ns` (the write is
//! answered with an error), and sending a write again under a fresh version. The write's entry
//! and its finish (into the range map) are in `upward.rs`.

use super::*;

impl Client {
    /// Sends off-loaded write `key` (its version, its bytes) to each of `targets` and waits
    /// for their answers.
    pub(super) fn send_copies(&mut self, key: u64, targets: &[StoreIdx]) {
        let op = &self.writes[&key];
        debug_assert_eq!(op.waiting, 0, "a write sent again while copies are owed");
        debug_assert!(
            targets
                .iter()
                .all(|&s| op.asked & bit(s) == 0 && op.succeeded & bit(s) == 0),
            "a copy sent twice to one store"
        );
        let (start, version, data) = (op.start, op.version, op.data.clone());
        for &s in targets {
            let request = Request::Write {
                client: self.config.client,
                volume: self.config.volume,
                offset_bytes: start,
                version,
                data: data.clone(),
            };
            self.send(s, request, Pending::Write { op: key });
        }
        let op = self.writes.get_mut(&key).expect("write");
        op.waiting = targets.len() as u32;
        for &s in targets {
            op.asked |= bit(s);
        }
    }

    /// One store answered (or failed) a write of an off-loaded op.
    pub(super) fn write_answered(&mut self, key: u64, store: StoreIdx, outcome: WriteOutcome) {
        let Some(op) = self.writes.get_mut(&key) else {
            return;
        };
        debug_assert!(
            op.waiting > 0 && op.asked & bit(store) != 0,
            "store {store} answered a write it was not asked for"
        );
        op.waiting -= 1;
        op.asked &= !bit(store);
        // Deletes there may have waited for this answer (a copy a write in flight may count
        // on): looked at again, also when the write then ends without entering the map.
        let st = &mut self.stores[store];
        st.stale_dirty |= !st.stale.is_empty();
        let op = self.writes.get_mut(&key).expect("write");
        match outcome {
            WriteOutcome::Done => op.succeeded |= bit(store),
            WriteOutcome::NotWritten => op.tried |= bit(store),
            WriteOutcome::Unknown => {
                op.tried |= bit(store);
                let (start, end, version) = (op.start, op.start + op.data.len() as u64, op.version);
                self.add_stale(store, start, end, version);
                self.copy_hidden(store, start, end, version, false);
            }
        }
        let op = &self.writes[&key];
        if op.waiting > 0 {
            return;
        }
        if !op.superseded.is_empty() {
            // A newer write overtook this one: deletes of the newer copies waited for it
            // (invariant 3); look at them again.
            for st in &mut self.stores {
                st.stale_dirty = true;
            }
        }
        if op.succeeded == 0 {
            if op.answered {
                // Answered with an error already, and no store holds it: it never happened.
                if let Some(op) = self.writes.remove(&key) {
                    self.write_moved(op.start, op.start + op.data.len() as u64);
                }
                return;
            }
            // Every copy failed. The retry takes a fresh version, so that deletes owed for the
            // failed attempt (versions at or below the old one) can never touch it; being the
            // newest, it supersedes the writes in flight it overlaps.
            self.retry_write(key);
            return;
        }
        if (op.succeeded.count_ones() as usize) < self.config.n_way {
            let now = self.now;
            let op = self.writes.get_mut(&key).expect("write");
            let since = *op.short_since.get_or_insert(now);
            if !op.answered && now.saturating_sub(since) < self.config.copies_timeout_ns {
                self.place_missing_copies(key);
                return;
            }
            self.give_up_copies(key);
            return;
        }
        self.finish_write(key);
    }

    /// `copies_timeout_ns` ran out with fewer than N copies: the write is answered with an
    /// error now (never acknowledged short) and its copies enter the map once the superblock
    /// says "degraded" (see `held_writes`).
    pub(super) fn give_up_copies(&mut self, key: u64) {
        let op = self.writes.get_mut(&key).expect("write");
        if !std::mem::replace(&mut op.answered, true) {
            let up_id = op.up_id;
            self.stats.too_few_copies += 1;
            self.upward_out
                .push_back((up_id, UpReply::Error(ClientError::TooFewCopies)));
        }
        self.set_degraded();
        if self.degraded_is_durable() {
            self.finish_write(key);
        } else {
            self.held_writes.push(key);
        }
    }

    /// When an off-loaded write not yet answered is answered with an error whatever its stores
    /// are doing: `copies_timeout_ns` after it first ended a round with fewer than N copies,
    /// else `full_timeout_ns` after it arrived (its first round not over: stores refusing it,
    /// holding it while their cleaning frees too little, or down).
    pub(super) fn write_deadline(&self, op: &WriteOp) -> Option<Nanos> {
        match (op.answered, op.short_since) {
            (true, _) => None,
            (false, Some(short)) => Some(short + self.config.copies_timeout_ns),
            (false, None) => Some(op.arrived + self.config.full_timeout_ns),
        }
    }

    /// Answers the off-loaded writes past their deadline (see [`Client::write_deadline`]):
    /// with no copy, ENOSPC ([`ClientError::NoSpace`]) — a store that holds a write this long
    /// counts as full, so reclaim runs under load —; with fewer than N, EIO
    /// ([`ClientError::TooFewCopies`]). A write whose stores still owe answers stays in
    /// flight (versions keep ordering it against later writes) and ends quietly: into the map
    /// with the copies it got (a failed write's outcome is unknown), or nowhere.
    pub(super) fn answer_late_writes(&mut self) {
        let late: Vec<u64> = self
            .writes
            .iter()
            .filter(|(_, op)| self.write_deadline(op).is_some_and(|t| t <= self.now))
            .map(|(&key, _)| key)
            .collect();
        for key in late {
            let op = &self.writes[&key];
            if op.succeeded != 0 {
                if op.waiting == 0 {
                    self.parked_writes.retain(|&k| k != key);
                    self.give_up_copies(key);
                } else {
                    let op = self.writes.get_mut(&key).expect("write");
                    op.answered = true;
                    let up_id = op.up_id;
                    self.stats.too_few_copies += 1;
                    self.upward_out
                        .push_back((up_id, UpReply::Error(ClientError::TooFewCopies)));
                }
                continue;
            }
            let (up_id, arrived, waiting) = (op.up_id, op.arrived, op.waiting);
            self.stats.refused_writes += 1;
            self.stats.late_writes += 1;
            self.upward_out
                .push_back((up_id, UpReply::Error(ClientError::NoSpace)));
            if waiting > 0 {
                // Held by a store that is up: as good as full.
                self.stores_full_since.get_or_insert(arrived);
                self.writes.get_mut(&key).expect("write").answered = true;
            } else {
                self.parked_writes.retain(|&k| k != key);
                if let Some(op) = self.writes.remove(&key) {
                    self.write_moved(op.start, op.start + op.data.len() as u64);
                }
            }
        }
    }

    /// Sends the copies an off-loaded write still lacks (same version, same bytes) to
    /// available stores that neither took nor refused it; with none, it is parked and tried
    /// again as stores return (see [`Client::retry_parked_writes`]).
    pub(super) fn place_missing_copies(&mut self, key: u64) {
        let op = &self.writes[&key];
        let need = self.config.n_way - op.succeeded.count_ones() as usize;
        let (start, end) = (op.start, op.start + op.data.len() as u64);
        // Not where a copy of the range is to be deleted: a delete in flight there might
        // remove the new copy (it removes every version up to its own).
        let mut exclude = op.succeeded | op.tried;
        for (i, st) in self.stores.iter().enumerate() {
            if !st.stale.is_empty()
                && st
                    .stale
                    .lookup(start, end)
                    .iter()
                    .any(|p| p.value.is_some())
            {
                exclude |= bit(i);
            }
        }
        // Nor where a deletion record not yet collected everywhere says this version of the
        // range is gone: a recovery that reads the record would delete the new copy with the
        // old one (the same version), and a store down meanwhile may keep the record for long.
        let version = op.version;
        for r in self.records.values() {
            if r.target < self.stores.len()
                && r.entries
                    .iter()
                    .any(|&(lo, hi, v)| v >= version && lo < end && start < hi)
            {
                exclude |= bit(r.target);
            }
        }
        let owed_there = exclude;
        exclude |= self.bound_excluded(key);
        let targets = self.choose_stores(need, exclude);
        if targets.is_empty() {
            let op = &self.writes[&key];
            // Only where the bound does not keep the copies out: a fresh version does not
            // make room under the bound (reclaim does, and the write waits for it, parked).
            if self.choose_stores(need, owed_there).is_empty()
                && !self.choose_stores(need, op.succeeded | op.tried).is_empty()
            {
                // Stores are up but a delete or record owed there covers this version, and
                // may wait for reclaim of an older copy that waits for this write: the write
                // is sent again whole under a fresh version, which nothing owed now removes.
                self.reversion_write(key);
                return;
            }
            self.parked_writes.push(key);
            self.parked_retry_at
                .get_or_insert(self.now + self.config.probe_interval_ns);
            return;
        }
        self.stats.copies_resent += targets.len() as u64;
        self.send_copies(key, &targets);
    }

    /// A write with fewer than N copies whose missing ones cannot go where they could without a
    /// delete owed there removing them: the copies it has become stale (deleted like any
    /// older copy), and it is sent again under a fresh version (see `retry_write`).
    fn reversion_write(&mut self, key: u64) {
        let op = self.writes.get_mut(&key).expect("write");
        let (start, end, version) = (op.start, op.start + op.data.len() as u64, op.version);
        let had = std::mem::take(&mut op.succeeded);
        op.tried = 0;
        for s in indices(had) {
            self.add_stale(s, start, end, version);
            self.copy_hidden(s, start, end, version, true);
        }
        self.stats.writes_reversioned += 1;
        self.retry_write(key);
    }
}
