//! Store replies and failures: answers, lost copies, failed and recovered stores, parked
//! writes, removing a store.

use super::*;

impl Client {
    /// A store answered request `id`; `load` is the load it piggy-backed (requests in flight
    /// on its volume), if any.
    pub(super) fn store_step(
        &mut self,
        now: Nanos,
        store: StoreIdx,
        id: u64,
        reply: Reply,
        load: Option<u64>,
    ) {
        self.now = now;
        if store >= self.stores.len() {
            return;
        }
        if let Some(load) = load {
            self.stores[store].reported_load = load;
        }
        self.stores[store].last_heard = now;
        if matches!(self.phase, Phase::Fenced) {
            return;
        }
        if reply == Reply::Error(StoreError::Fenced) {
            self.deposed();
            return;
        }
        let Some(out) = self.outstanding.remove(&id) else {
            return; // Late: the request was already given up.
        };
        if out.store != store {
            self.outstanding.insert(id, out);
            return;
        }
        self.settle_outstanding(&out);
        if matches!(
            reply,
            Reply::Error(StoreError::Recovering) | Reply::Error(StoreError::NoStore)
        ) {
            // Nothing was done: fail this request and the store with it.
            self.request_failed(store, out.pending, false);
            self.store_failed(store);
        } else {
            if !self.stores[store].up && !self.stores[store].removed {
                self.store_recovered(store);
            }
            self.store_replied(store, out.pending, reply);
        }
        self.pump();
    }

    /// A store fenced this client (a newer incarnation recovered from it): every request not
    /// yet answered fails with [`ClientError::Fenced`], and nothing more is sent anywhere.
    fn deposed(&mut self) {
        self.phase = Phase::Fenced;
        self.stats.fenced += 1;
        let mut failed: Vec<u64> = Vec::new();
        failed.extend(self.writes.values().map(|op| op.up_id));
        failed.extend(self.reads.values().map(|r| r.up_id));
        failed.extend(self.base_pending.values().filter_map(|k| match k {
            BaseKind::UpWrite { up_id, .. } => Some(*up_id),
            _ => None,
        }));
        failed.extend(self.queued_upward.drain(..).map(|(id, _)| id));
        failed.sort_unstable();
        failed.dedup();
        failed.retain(|id| {
            !self
                .writes
                .values()
                .any(|op| op.answered && op.up_id == *id)
        });
        self.writes.clear();
        self.held_writes.clear();
        self.reads.clear();
        self.reads_behind_failed_writes.clear();
        self.parked_writes.clear();
        self.base_pending.clear();
        self.local.clear();
        self.local_disk.clear();
        self.outstanding.clear();
        for id in failed {
            self.upward_out
                .push_back((id, UpReply::Error(ClientError::Fenced)));
        }
    }

    /// The connection to a store broke (the store restarted, or the network failed): every
    /// request outstanding there may or may not have been carried out, and the store counts as
    /// failed until a probe gets an answer.
    pub(super) fn connection_lost_step(&mut self, now: Nanos, store: StoreIdx) {
        self.now = now;
        if store >= self.stores.len() {
            return;
        }
        if matches!(self.phase, Phase::Ready) && self.stores[store].up {
            self.store_failed(store);
        } else {
            self.fail_outstanding(store);
        }
        self.pump();
    }

    pub(super) fn store_replied(&mut self, store: StoreIdx, pending: Pending, reply: Reply) {
        match pending {
            Pending::Write { op } => {
                let outcome = match reply {
                    Reply::Done => {
                        // A store took a write: the stores are not full (any more).
                        self.stores_full_since = None;
                        WriteOutcome::Done
                    }
                    _ => WriteOutcome::NotWritten,
                };
                self.write_answered(op, store, outcome);
            }
            Pending::Read { read, spans } => self.read_replied(store, read, &spans, reply),
            Pending::ReclaimAny { writes_acked } => {
                self.reclaim_any_replied(store, writes_acked, reply)
            }
            Pending::ReclaimRead { start, end } => match reply {
                Reply::Read(pieces) => {
                    self.reclaim_got(store, pieces, true);
                }
                _ => {
                    self.reclaim_jobs -= 1;
                    self.vulnerable_jobs -= 1;
                    self.retry_vulnerable(start, end);
                }
            },
            Pending::Delete {
                start,
                end,
                version,
            } => self.delete_replied(store, (start, end, version), reply),
            Pending::RecordWrite { slot } => {
                let outcome = match reply {
                    Reply::Done => WriteOutcome::Done,
                    _ => WriteOutcome::NotWritten,
                };
                self.record_written(store, slot, outcome);
            }
            Pending::RecordGc { slot } => {
                if let Some(r) = self.records.get_mut(&slot) {
                    r.collecting &= !bit(store);
                    if reply == Reply::Done {
                        r.holders &= !bit(store);
                    }
                    if r.holders == 0 {
                        self.records.remove(&slot);
                        self.settle_dirty = true;
                        self.stats.deletion_records_collected += 1;
                    }
                }
            }
            Pending::Metadata => {
                if let (Phase::Fetching(f), Reply::Metadata(extents)) = (&mut self.phase, reply) {
                    f.metadata[store] = Some(extents);
                    self.maybe_finish_fetch();
                }
            }
            Pending::RecordsMeta => self.records_meta_replied(store, reply),
            Pending::Records => {
                if let (Phase::Fetching(f), Reply::Read(pieces)) = (&mut self.phase, reply) {
                    f.records[store] = Some(pieces);
                    self.maybe_finish_fetch();
                }
            }
            Pending::Probe => self.stores[store].probing = false,
            Pending::Seal { covers } => {
                let st = &mut self.stores[store];
                debug_assert!(st.seal_in_flight, "a barrier answered with none in flight");
                st.seal_in_flight = false;
                if matches!(reply, Reply::Metadata(_)) {
                    // Ranges are only added while a barrier is in flight: it covers the first.
                    debug_assert!(
                        covers <= st.unsealed.len(),
                        "a barrier covering {covers} of {} unsealed ranges",
                        st.unsealed.len()
                    );
                    st.unsealed.drain(..covers);
                    self.stats.seals += 1;
                    self.retry_parked_reads();
                } else {
                    st.seal_after = self.now + self.config.probe_interval_ns;
                }
            }
            Pending::ClearRecords => {
                let st = &mut self.stores[store];
                st.old_records = if reply == Reply::Done {
                    None
                } else {
                    st.old_records.map(|(v, _)| (v, false))
                };
                // The records saying they were void may go now.
                self.maybe_collect_records(store);
            }
        }
    }

    /// A store answered an upward read for `spans`: the pieces it has in them go up (what it
    /// holds between them is not the read's: older copies of data now elsewhere); gaps (the
    /// copy was reclaimed meanwhile, or the store lost it) are resolved again.
    fn read_replied(&mut self, store: StoreIdx, read: u64, spans: &[Span], reply: Reply) {
        let mut pieces = match reply {
            Reply::Read(pieces) => pieces,
            _ => Vec::new(),
        };
        for &span in spans {
            self.read_span_replied(store, read, span, &mut pieces);
        }
        self.read_piece_finished(read);
    }

    /// One span of a store's answer to an upward read, `[start, end)` at `version`.
    fn read_span_replied(
        &mut self,
        store: StoreIdx,
        read: u64,
        (start, end, version): Span,
        pieces: &mut [Piece],
    ) {
        debug_assert!(start < end, "an empty read piece at {start}");
        let mut covered = start;
        let mut gaps = Vec::new();
        let mut elsewhere = Vec::new();
        for (e, data) in pieces.iter_mut() {
            let e = &*e;
            let lo = e.offset_bytes.max(start);
            let hi = (e.offset_bytes + e.length_bytes).min(end);
            if lo >= hi || data.len() as u64 != e.length_bytes {
                continue;
            }
            if lo > covered {
                gaps.push((covered, lo));
            }
            covered = hi;
            if e.version < version {
                // Older than the copy acknowledged there: the store lost it.
                gaps.push((lo, hi));
                continue;
            }
            if e.version > version
                && !self.writes.values().any(|op| op.version == e.version)
                && !self.map_all(lo, hi, |l| l.version == e.version)
            {
                // Newer, from no write in flight nor the map now: a copy that hides the
                // current one there (see `copy_hidden`). What the store alone holds is
                // answered with it; the rest is read elsewhere (not lost).
                self.copy_hidden(store, lo, hi, e.version, true);
                for (plo, phi, l) in self.map_pieces(lo, hi) {
                    if l.is_some_and(|l| !l.on_base && l.stores & bit(store) != 0) {
                        let skip = (plo - e.offset_bytes) as usize;
                        let len = (phi - plo) as usize;
                        self.read_piece_done(read, plo, data, skip, len);
                    } else {
                        elsewhere.push((plo, phi));
                    }
                }
                continue;
            }
            // The version read, or a newer one being written (concurrent).
            let skip = (lo - e.offset_bytes) as usize;
            self.read_piece_done(read, lo, data, skip, (hi - lo) as usize);
        }
        if covered < end {
            gaps.push((covered, end));
        }
        // Gaps: the copy was deleted meanwhile (reclaimed), or the store lost it (its
        // log was damaged); resolve them again, elsewhere in the second case.
        for (lo, hi) in gaps {
            if lo < hi {
                self.copy_lost(store, lo, hi, version);
                self.read_piece(read, lo, hi);
            }
        }
        for (lo, hi) in elsewhere {
            self.read_piece(read, lo, hi);
        }
    }

    /// A store answered a reclaim `read_any`: the data goes to the base; the store's window
    /// of such reads in flight grows while they find data, and it is not asked again until a
    /// probe interval has passed when they do not.
    fn reclaim_any_replied(&mut self, store: StoreIdx, writes_acked: u64, reply: Reply) {
        debug_assert!(
            self.reclaim_jobs > 0,
            "a reclaim answer with no reclaim job"
        );
        match reply {
            Reply::ReadAny(Some((extent, data))) => {
                let useful = self.reclaim_got(store, vec![(extent, data)], false);
                let n_reclaim = self.config.n_reclaim as u64;
                let st = &mut self.stores[store];
                if useful {
                    st.any_window = (st.any_window * 2).min(n_reclaim.max(1));
                } else {
                    st.any_window = 1;
                    st.reclaim_after = self.now + self.config.probe_interval_ns;
                }
                return;
            }
            Reply::ReadAny(None) if self.stores[store].writes_acked == writes_acked => {
                self.stores[store].may_hold = false;
                self.stores[store].any_window = 1;
            }
            _ => self.stores[store].any_window = 1,
        }
        self.reclaim_jobs -= 1;
    }

    /// A store answered a delete of its copies of `[start, end)` up to `version`: done, they
    /// leave its stale map (and deletes elsewhere that waited for them are looked at again);
    /// refused, they are sent again.
    fn delete_replied(&mut self, store: StoreIdx, (start, end, version): Span, reply: Reply) {
        debug_assert!(start < end, "an empty delete at {start}");
        debug_assert!(
            self.stores[store].deletes_in_flight < DELETES_IN_FLIGHT_MAX,
            "more deletes in flight than allowed"
        );
        let ok = reply == Reply::Done;
        self.stores[store]
            .stale
            .update(start, end, |_, _, old| match old {
                Some(v) if ok && v.version <= version => None,
                Some(v) => Some(Stale { sent: false, ..*v }),
                None => None,
            });
        // A settling reclaim may have waited for this delete.
        self.settle_dirty = true;
        if !ok {
            self.stores[store].stale_dirty = true;
        } else {
            // Deletes of current copies on other stores may have waited for this older
            // copy to go (invariant 3): look at them again.
            for (i, st) in self.stores.iter_mut().enumerate() {
                if i != store
                    && !st.stale.is_empty()
                    && st
                        .stale
                        .lookup(start, end)
                        .iter()
                        .any(|p| p.value.is_some_and(|v| !v.sent))
                {
                    st.stale_dirty = true;
                }
            }
        }
        self.maybe_collect_records(store);
    }

    /// Recovery: the extents of a store's deletion records; they are read next.
    fn records_meta_replied(&mut self, store: StoreIdx, reply: Reply) {
        if let (Phase::Fetching(_), Reply::Metadata(extents)) = (&self.phase, reply) {
            // Metadata is answered once every earlier write is durable, so the records
            // listed include those the previous incarnation was still writing.
            let end = extents
                .iter()
                .map(|e| e.offset_bytes + e.length_bytes)
                .max();
            match end {
                None => {
                    if let Phase::Fetching(f) = &mut self.phase {
                        f.records[store] = Some(Vec::new());
                    }
                    self.maybe_finish_fetch();
                }
                Some(end) => self.send(
                    store,
                    Request::Read {
                        client: companion(self.config.client),
                        offset_bytes: 0,
                        length_bytes: end,
                    },
                    Pending::Records,
                ),
            }
        }
    }

    /// A request that got no answer (`unknown`: it may or may not have been carried out) or a
    /// refusal.
    pub(super) fn request_failed(&mut self, store: StoreIdx, pending: Pending, unknown: bool) {
        match pending {
            Pending::Write { op } => {
                let outcome = if unknown {
                    WriteOutcome::Unknown
                } else {
                    WriteOutcome::NotWritten
                };
                self.write_answered(op, store, outcome);
            }
            Pending::Read { read, spans } => {
                for (start, end, _) in spans {
                    self.read_piece(read, start, end);
                }
                self.read_piece_finished(read);
            }
            Pending::ReclaimAny { .. } => self.reclaim_jobs -= 1,
            Pending::ReclaimRead { start, end } => {
                self.reclaim_jobs -= 1;
                self.vulnerable_jobs -= 1;
                self.retry_vulnerable(start, end);
            }
            Pending::Delete { start, end, .. } => {
                self.stores[store].stale.update(start, end, |_, _, old| {
                    old.map(|v| Stale { sent: false, ..*v })
                });
                self.stores[store].stale_dirty = true;
            }
            Pending::RecordWrite { slot } => {
                let outcome = if unknown {
                    WriteOutcome::Unknown
                } else {
                    WriteOutcome::NotWritten
                };
                self.record_written(store, slot, outcome);
            }
            Pending::RecordGc { slot } => {
                if let Some(r) = self.records.get_mut(&slot) {
                    r.collecting &= !bit(store);
                }
            }
            Pending::Metadata | Pending::RecordsMeta | Pending::Records => {
                if let Phase::Fetching(f) = &mut self.phase {
                    f.retry_at[store] = Some(self.now + self.config.probe_interval_ns);
                    f.failed[store] = true;
                }
                self.maybe_finish_fetch();
            }
            Pending::Probe => self.stores[store].probing = false,
            Pending::Seal { .. } => self.stores[store].seal_in_flight = false,
            Pending::ClearRecords => {
                if let Some((_, sent)) = self.stores[store].old_records.as_mut() {
                    *sent = false;
                }
            }
        }
    }

    /// A copy of `version` over `[start, end)` may be on `store` without entering the range map
    /// (a write's copy whose outcome is unknown, or one made stale when its write was sent
    /// again under a fresh version). A store keeps only the newest version of each byte, so
    /// where the map's current copy is older and on `store`, the store no longer has it: reads
    /// there would return the other write's data (which may have failed after a read returned
    /// the current one), reclaim could not read the current copy there, and the stale copy's
    /// delete would wait for that reclaim under invariant 1 for good. Such pieces drop `store`
    /// from their holders and are re-protected first (as after a copy lost) when another store
    /// holds them. A piece `store` alone holds has nothing else to read: when the copy is known
    /// to be there (`landed`: the store acknowledged it, or answered a read with it), it
    /// becomes the current one — its write, failed or still going, takes effect there, as a
    /// restart would find — and is re-protected first; otherwise the piece stays as it is and
    /// reads see whichever version the store answers with (reclaim adopts a newer one:
    /// `reclaim_got`).
    pub(super) fn copy_hidden(
        &mut self,
        store: StoreIdx,
        start: u64,
        end: u64,
        version: u64,
        landed: bool,
    ) {
        let (mut vulnerable, mut adopted, mut unsealed) = (Vec::new(), Vec::new(), Vec::new());
        self.map.update(start, end, |lo, hi, old| {
            let o = old?;
            if o.version >= version || o.on_base || o.stores & bit(store) == 0 {
                return Some(*o);
            }
            let others = o.stores & !bit(store);
            if others != 0 {
                vulnerable.push((lo, hi));
                return Some(Loc {
                    stores: others,
                    ..*o
                });
            }
            if !landed {
                // It may still land here: reads of it here wait for a barrier (`unsealed`).
                unsealed.push((lo, hi));
                return Some(*o);
            }
            adopted.push((lo, hi));
            Some(Loc {
                version,
                stores: bit(store),
                on_base: false,
                local: false,
            })
        });
        for &(lo, hi) in &adopted {
            // Its copy is the current one now: not to be deleted as stale.
            self.stores[store]
                .stale
                .update(lo, hi, |_, _, old| match old {
                    Some(x) if x.version <= version && !x.sent => None,
                    other => other.copied(),
                });
        }
        if !unsealed.is_empty() {
            debug_assert!(
                unsealed
                    .iter()
                    .all(|&(lo, hi)| start <= lo && lo < hi && hi <= end),
                "unsealed ranges {unsealed:?} outside the copy [{start}, {end})"
            );
            self.stats.unsealed_ranges += unsealed.len() as u64;
            self.stores[store].unsealed.extend(unsealed);
        }
        if vulnerable.is_empty() && adopted.is_empty() {
            return;
        }
        self.stats.hidden_copies += 1;
        // One copy of what reads see now: with N > 1, a restart must wait for this store.
        if self.config.n_way > 1 {
            vulnerable.extend(adopted);
        }
        if !vulnerable.is_empty() {
            self.set_degraded();
        }
        self.vulnerable.extend(vulnerable);
        self.settle_dirty = true;
        self.stores[store].stale_dirty = true;
    }

    /// Whether every byte of `[start, end)` is in the range map, its piece passing `f`.
    fn map_all(&self, start: u64, end: u64, f: impl Fn(&Loc) -> bool) -> bool {
        self.map
            .lookup(start, end)
            .iter()
            .all(|p| p.value.is_some_and(&f))
    }

    /// A read found no copy of `version` in `[start, end)` on `store`, where the range map still
    /// says one is: the store lost it (a damaged log). Its other copies become the only ones
    /// (re-protected first, as after a store failure); without another copy the bytes are lost
    /// (counted in [`Stats::lost_bytes`]) and the base volume's older contents are what remain.
    pub(super) fn copy_lost(&mut self, store: StoreIdx, start: u64, end: u64, version: u64) {
        let (mut lost, mut dropped, mut vulnerable) = (0, 0, Vec::new());
        self.map.update(start, end, |lo, hi, old| {
            let o = old?;
            if o.version != version || o.on_base || o.stores & bit(store) == 0 {
                return Some(*o);
            }
            let stores = o.stores & !bit(store);
            if stores == 0 {
                lost += hi - lo;
                dropped += hi - lo;
                None
            } else {
                vulnerable.push((lo, hi));
                Some(Loc { stores, ..*o })
            }
        });
        if lost + vulnerable.len() as u64 == 0 {
            return;
        }
        self.stats.lost_bytes += lost;
        self.stats.offloaded_bytes -= dropped;
        self.stats.lost_copies += 1;
        if !vulnerable.is_empty() {
            self.set_degraded();
        }
        self.vulnerable.extend(vulnerable);
        self.settle_dirty = true;
    }

    /// Marks a store failed: its outstanding requests fail, its data becomes vulnerable (and is
    /// reclaimed first), deletes owed to it are recorded on other stores.
    pub(super) fn store_failed(&mut self, store: StoreIdx) {
        let st = &mut self.stores[store];
        if !st.up {
            return;
        }
        st.up = false;
        st.down_since = self.now;
        st.next_probe = self.now + self.config.probe_interval_ns;
        st.stale_dirty = true;
        self.stats.store_failures += 1;
        self.fail_outstanding(store);
        let st = &mut self.stores[store];
        st.stale.update(0, u64::MAX, |_, _, old| {
            old.map(|v| Stale { sent: false, ..*v })
        });
        let vulnerable: Vec<(u64, u64)> = self
            .map
            .iter()
            .filter(|(_, _, l)| !l.on_base && l.stores & bit(store) != 0)
            .map(|(s, e, _)| (s, e))
            .collect();
        self.vulnerable.extend(vulnerable);
    }

    /// Every request outstanding at a store fails with an unknown outcome.
    pub(super) fn fail_outstanding(&mut self, store: StoreIdx) {
        let ids: Vec<u64> = self
            .outstanding
            .iter()
            .filter(|(_, o)| o.store == store)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            let out = self.outstanding.remove(&id).expect("outstanding");
            self.settle_outstanding(&out);
            self.request_failed(store, out.pending, true);
        }
    }

    pub(super) fn store_recovered(&mut self, store: StoreIdx) {
        let st = &mut self.stores[store];
        st.up = true;
        st.may_hold = true;
        st.stale_dirty = true;
        self.retry_parked_reads();
        self.retry_parked_writes();
    }

    /// The read pieces that waited for a store (to answer again, or to be sealed) are resolved
    /// again.
    pub(super) fn retry_parked_reads(&mut self) {
        let parked_reads = std::mem::take(&mut self.parked_reads);
        for (read, lo, hi) in parked_reads {
            self.read_piece(read, lo, hi);
            self.read_piece_finished(read);
        }
    }

    /// Sends a barrier to each store up with unsealed ranges and none in flight.
    pub(super) fn pump_seals(&mut self) {
        for s in 0..self.stores.len() {
            let st = &self.stores[s];
            if st.unsealed.is_empty()
                || st.seal_in_flight
                || !st.up
                || st.removed
                || self.now < st.seal_after
            {
                continue;
            }
            let covers = st.unsealed.len();
            self.stores[s].seal_in_flight = true;
            self.send(
                s,
                Request::Metadata {
                    client: self.config.client,
                    generation: self.generation,
                },
                Pending::Seal { covers },
            );
        }
    }

    pub(super) fn retry_parked_writes(&mut self) {
        self.parked_retry_at = None;
        let parked_writes = std::mem::take(&mut self.parked_writes);
        for key in parked_writes {
            let Some(op) = self.writes.get_mut(&key) else {
                continue;
            };
            op.tried = 0;
            if op.succeeded == 0 {
                self.retry_write(key);
            } else if self.now.saturating_sub(op.short_since.unwrap_or(self.now))
                < self.config.copies_timeout_ns
            {
                self.place_missing_copies(key);
            } else {
                self.give_up_copies(key);
            }
        }
    }

    /// Sends a write again under a fresh version: the newest now, nothing completed before
    /// supersedes it.
    pub(super) fn retry_write(&mut self, key: u64) {
        let version = self.next_version();
        let Some(op) = self.writes.get_mut(&key) else {
            return;
        };
        op.version = version;
        op.superseded.clear();
        let (start, end) = (op.start, op.start + op.data.len() as u64);
        self.write_moved(start, end);
        self.place_write(key);
    }

    /// [`Client::remove_store`]'s work.
    pub(super) fn remove_store_step(&mut self, now: Nanos, store: StoreIdx) {
        self.now = now;
        if store >= self.stores.len() || self.stores[store].removed {
            return;
        }
        self.fail_outstanding(store);
        let st = &mut self.stores[store];
        st.removed = true;
        st.up = false;
        st.stale = RangeMap::new();
        self.settle_dirty = true;
        let mut lost = 0;
        let mut removed_bytes = 0;
        self.map.update(0, u64::MAX, |lo, hi, old| {
            let o = old?;
            if o.stores & bit(store) == 0 {
                return Some(*o);
            }
            let stores = o.stores & !bit(store);
            if stores == 0 {
                removed_bytes += hi - lo;
                if !o.on_base {
                    lost += hi - lo;
                }
                None
            } else {
                Some(Loc { stores, ..*o })
            }
        });
        self.stats.lost_bytes += lost;
        self.stats.offloaded_bytes -= removed_bytes;
        for r in self.records.values_mut() {
            if r.target == store {
                r.collect = true;
            }
            r.holders &= !bit(store);
        }
        self.records.retain(|_, r| r.holders != 0 || r.writing != 0);
        // Writes waiting for this store try others.
        for op in self.writes.values_mut() {
            op.tried |= bit(store);
        }
        if let Phase::Fetching(f) = &mut self.phase {
            f.metadata[store] = Some(Vec::new());
            f.records[store] = Some(Vec::new());
            f.retry_at[store] = None;
            self.maybe_finish_fetch();
        }
        self.write_superblock();
        self.pump();
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
}
