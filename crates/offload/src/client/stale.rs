//! Stale copies and deletion records: the deletes owed to stores, Everest's invariants on
//! them, and the records kept for failed stores.

use super::*;

impl Client {
    pub(super) fn add_stale(&mut self, store: StoreIdx, start: u64, end: u64, version: u64) {
        debug_assert!(start < end, "an empty stale range at {start}");
        debug_assert!(
            version < (self.generation << VERSION_BITS) | self.next_counter,
            "a stale copy of version {version}, not yet given out"
        );
        let st = &mut self.stores[store];
        if st.removed {
            return;
        }
        st.stale.update(start, end, |_, _, old| {
            Some(match old {
                Some(v) if v.version >= version => *v,
                _ => Stale {
                    version,
                    sent: false,
                    recording: false,
                    slot: None,
                },
            })
        });
        st.stale_dirty = true;
    }

    /// Sends the deletes owed to available stores; writes deletion records for failed ones.
    pub(super) fn pump_stale(&mut self) {
        for s in 0..self.stores.len() {
            if !self.stores[s].stale_dirty || self.stores[s].removed {
                continue;
            }
            self.stores[s].stale_dirty = false;
            if self.stores[s].up {
                let todo: Vec<(u64, u64, u64)> = self.stores[s]
                    .stale
                    .iter()
                    .filter(|(_, _, v)| !v.sent)
                    .map(|(lo, hi, v)| (lo, hi, v.version))
                    .collect();
                let todo = self.allowed_deletes(s, &todo);
                for (lo, hi, version) in todo {
                    if self.stores[s].deletes_in_flight >= DELETES_IN_FLIGHT_MAX {
                        self.stores[s].stale_dirty = true;
                        break;
                    }
                    self.check_delete_allowed(s, lo, hi, version);
                    self.stores[s]
                        .stale
                        .update(lo, hi, |_, _, old| old.map(|v| Stale { sent: true, ..*v }));
                    self.stats.deletes_sent += 1;
                    let request = Request::Delete {
                        client: self.config.client,
                        volume: self.config.volume,
                        offset_bytes: lo,
                        length_bytes: hi - lo,
                        version,
                        generation: self.generation,
                    };
                    self.send(
                        s,
                        request,
                        Pending::Delete {
                            start: lo,
                            end: hi,
                            version,
                        },
                    );
                }
            } else {
                self.record_deletions(s);
            }
        }
        self.pump_record_gc();
    }

    /// A store missed at a recovery is back: the deletion records it holds from earlier lives
    /// go. Each is a copy: a record is relied on only once durable on N stores, so another copy
    /// was read from a store that answered (at most N-1 were missed). One that was not durable
    /// was never read, and must not be read later either: if this life ends first, the next
    /// finds them void (`merge`) and deletes them likewise. The records saying the store was
    /// missed stay until then (`maybe_collect_records`).
    pub(super) fn pump_old_records(&mut self) {
        for s in 0..self.stores.len() {
            let st = &self.stores[s];
            let Some((version, false)) = st.old_records else {
                continue;
            };
            if !st.up || st.removed {
                continue;
            }
            self.stores[s].old_records = Some((version, true));
            let request = Request::Delete {
                client: companion(self.config.client),
                volume: self.config.volume,
                offset_bytes: 0,
                length_bytes: 1 << 62,
                version,
                generation: self.generation,
            };
            self.send(s, request, Pending::ClearRecords);
        }
    }

    /// Whether a delete of versions up to `version` over `[start, end)` may go to `store` (or
    /// be recorded for it while it is down): a delete removes every copy at or below its
    /// version, so where the store holds the current copy at or below it, that copy goes too.
    ///
    /// - Invariant 1: the current copy is removed only once it is on the base volume (a copy
    ///   whose write failed with an unknown outcome, over a current older copy on the same
    ///   store, waits for the current copy's reclaim). A copy that a write still in flight
    ///   counts on (the store acknowledged it) is current in the same sense before the write
    ///   reaches the map.
    /// - Invariant 3: the current copy is removed only once no older copy that is not deleted
    ///   for sure remains on a store that does not hold the current version — otherwise a
    ///   restart would find that older copy as the latest and reclaim it over newer data — and
    ///   no older write that the current one overtook is still in flight (it could yet land
    ///   on such a store). (On a holder, deleting the current copy deletes its older copies
    ///   too.)
    pub(super) fn delete_allowed(
        &self,
        store: StoreIdx,
        start: u64,
        end: u64,
        version: u64,
    ) -> bool {
        self.delete_refusal(store, start, end, version).is_none()
    }

    /// The parts of the stale ranges `stale` (start, end, version) whose delete may go to
    /// `store` now: each range is cut where the range map's pieces meet, since whether a
    /// delete may remove a current copy is decided piece by piece; the allowed pieces of one
    /// range are joined again. A range allowed only as a whole would let two stores wait on
    /// each other: each holding the current copy of one piece and an older copy of the
    /// other's, neither's delete could go (invariant 3), though the older copies' parts could.
    pub(super) fn allowed_deletes(
        &self,
        store: StoreIdx,
        stale: &[(u64, u64, u64)],
    ) -> Vec<(u64, u64, u64)> {
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        for &(lo, hi, version) in stale {
            if self.delete_allowed(store, lo, hi, version) {
                out.push((lo, hi, version));
                continue;
            }
            for p in self.map.lookup(lo, hi) {
                if !self.delete_allowed(store, p.start, p.end, version) {
                    continue;
                }
                match out.last_mut() {
                    Some(last) if last.1 == p.start && last.2 == version => last.1 = p.end,
                    _ => out.push((p.start, p.end, version)),
                }
            }
        }
        out
    }

    /// Why a delete may not go yet (see [`Client::delete_allowed`]), or `None`.
    pub(super) fn delete_refusal(
        &self,
        store: StoreIdx,
        start: u64,
        end: u64,
        version: u64,
    ) -> Option<&'static str> {
        // A write still in flight counts on the copies stores have acknowledged; it is not in
        // the map yet, so its copies are looked at here.
        if self.writes.values().any(|op| {
            (op.succeeded | op.asked) & bit(store) != 0
                && op.version <= version
                && op.start < end
                && start < op.start + op.data.len() as u64
        }) {
            return Some(
                "invariant 1: it removes a copy that a write in flight counts on (acknowledged by the store, or sent to it and not answered; not yet in the map)",
            );
        }
        if let Some(why) = self.short_copy_refusal(store, start, end, version) {
            return Some(why);
        }
        self.current_copy_refusal(store, start, end, version, true)
    }

    /// Why a delete of versions up to `version` of `[start, end)` from `store` (or a deletion
    /// record standing for it) may not go before the degraded mark is durable: where the
    /// current copy, not yet on the base volume, is counted on fewer than N stores, the store
    /// outside that count may still hold a copy of it (a failed store's copy, dropped from the
    /// count). A restart that finds no durable mark goes on with N-1 stores missing, and may
    /// miss the stores that are counted; the uncounted copy is then the only one left.
    pub(super) fn short_copy_refusal(
        &self,
        store: StoreIdx,
        start: u64,
        end: u64,
        version: u64,
    ) -> Option<&'static str> {
        if !self.degraded || self.degraded_is_durable() {
            return None;
        }
        let short = self.map.lookup(start, end).into_iter().any(|p| {
            p.value.is_some_and(|l| {
                l.version <= version
                    && !l.on_base
                    && l.stores & bit(store) == 0
                    && (l.stores.count_ones() as usize) < self.config.n_way
            })
        });
        short.then_some(
            "durability: it may remove a copy of data with fewer than N counted copies before the degraded mark is durable",
        )
    }

    /// Why deleting versions up to `version` of `[start, end)` from `store` may not remove the
    /// current copy there: invariant 1 (it is not on the base volume yet), invariant 3 (an older
    /// write overtaken by it is still in flight and may land on another store; with
    /// `stale_copies`, an older copy the stale maps name, without a durable deletion record,
    /// remains on a store that does not hold the current one).
    pub(super) fn current_copy_refusal(
        &self,
        store: StoreIdx,
        start: u64,
        end: u64,
        version: u64,
        stale_copies: bool,
    ) -> Option<&'static str> {
        for p in self.map.lookup(start, end) {
            let Some(l) = p.value else { continue };
            if l.stores & bit(store) == 0 || l.version > version {
                continue;
            }
            if !l.on_base {
                return Some("invariant 1: it removes a current copy not yet on the base volume");
            }
            if self.writes.values().any(|op| {
                op.version < l.version
                    && op.start < p.end
                    && p.start < op.start + op.data.len() as u64
            }) {
                return Some(
                    "invariant 3: it removes the current copy while an older write that may land elsewhere is in flight",
                );
            }
            if stale_copies && self.older_copies_elsewhere(p.start, p.end, u64::MAX, l.stores) {
                return Some(
                    "invariant 3: it removes the current copy while an older copy remains on a store that does not hold it",
                );
            }
        }
        None
    }

    pub(super) fn check_delete_allowed(&self, store: StoreIdx, start: u64, end: u64, version: u64) {
        if let Some(why) = self.delete_refusal(store, start, end, version) {
            panic!(
                "{why}: deleting versions up to {version} of [{start}, {end}) from store {store}; map {:?}",
                self.map.lookup(start, end)
            );
        }
    }

    /// Writes a deletion record of the unrecorded stale copies on a failed store to N other
    /// stores.
    pub(super) fn record_deletions(&mut self, target: StoreIdx) {
        let unrecorded: Vec<(u64, u64, u64)> = self.stores[target]
            .stale
            .iter()
            .filter(|(_, _, v)| v.slot.is_none() && !v.recording)
            .map(|(lo, hi, v)| (lo, hi, v.version))
            .collect();
        let mut entries = self.allowed_deletes(target, &unrecorded);
        entries.truncate(ENTRIES_MAX);
        if entries.is_empty() {
            return;
        }
        for &(lo, hi, v) in &entries {
            // A durable deletion record counts as the delete itself at recovery.
            self.check_delete_allowed(target, lo, hi, v);
        }
        if self.stores[target].record_after > self.now {
            self.stores[target].stale_dirty = true;
            return;
        }
        let holders = self.choose_stores(self.config.n_way, bit(target));
        if holders.len() < self.config.n_way {
            // Not enough stores to hold it: the copies stay blocking until the store returns
            // or more stores are up.
            self.stores[target].stale_dirty = true;
            return;
        }
        for &(lo, hi, _) in &entries {
            self.stores[target].stale.update(lo, hi, |_, _, old| {
                old.map(|v| Stale {
                    recording: true,
                    ..*v
                })
            });
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        let version = self.next_version();
        let payload = DeletionRecord {
            target: self.stores[target].info.id,
            entries: entries.clone(),
        }
        .encode();
        let mut mask = 0;
        for &h in &holders {
            mask |= bit(h);
            let request = Request::Write {
                client: companion(self.config.client),
                volume: self.config.volume,
                offset_bytes: slot << SLOT_SHIFT,
                version,
                data: payload.clone(),
            };
            self.send(h, request, Pending::RecordWrite { slot });
        }
        self.records.insert(
            slot,
            DelRecordInfo {
                target,
                version,
                bytes: payload.len() as u64,
                holders: 0,
                writing: mask,
                entries,
                collecting: 0,
                collect: false,
            },
        );
        self.stats.deletion_records_written += 1;
        // More entries than fit in one record: the rest go in the next.
        self.stores[target].stale_dirty = true;
    }

    pub(super) fn record_written(&mut self, store: StoreIdx, slot: u64, outcome: WriteOutcome) {
        let Some(r) = self.records.get_mut(&slot) else {
            return;
        };
        debug_assert!(
            r.writing & bit(store) != 0,
            "store {store} answered a deletion record it was not writing"
        );
        debug_assert_ne!(
            r.target, store,
            "a deletion record kept on the store it is for"
        );
        r.writing &= !bit(store);
        match outcome {
            WriteOutcome::Done => r.holders |= bit(store),
            // One holder failed: the record is not durable on N stores. Its entries are
            // recorded again; this record is collected, also from a store that may hold it.
            WriteOutcome::Unknown => {
                r.holders |= bit(store);
                r.collect = true;
            }
            WriteOutcome::NotWritten => r.collect = true,
        }
        if r.writing != 0 {
            return;
        }
        let (target, entries, failed) = (r.target, r.entries.clone(), r.collect);
        let st = &mut self.stores[target];
        if failed {
            st.record_after = self.now + self.config.probe_interval_ns;
        }
        for (lo, hi, version) in entries {
            st.stale.update(lo, hi, |_, _, old| {
                old.map(|v| {
                    if !failed && v.version <= version {
                        Stale {
                            recording: false,
                            slot: Some(slot),
                            ..*v
                        }
                    } else {
                        Stale {
                            recording: false,
                            ..*v
                        }
                    }
                })
            });
        }
        st.stale_dirty = true;
        if !failed {
            // Recorded copies no longer hold back deletes on other stores (invariant 3).
            for st in &mut self.stores {
                if !st.stale.is_empty() {
                    st.stale_dirty = true;
                }
            }
        }
        self.maybe_collect_records(target);
    }

    /// Once no stale copy on `target` needs a record any more, its records are deleted.
    pub(super) fn maybe_collect_records(&mut self, target: StoreIdx) {
        if !self
            .records
            .values()
            .any(|r| r.target == target && !r.collect)
        {
            return;
        }
        let st = &self.stores[target];
        // While it holds records of earlier lives that a recovery did not read (void), the
        // records saying so stay: a restart would otherwise apply them.
        if st.old_records.is_some() {
            return;
        }
        // While a stale copy there is not recorded, the records of older copies it replaced
        // (or, after a recovery without the store, of copies it may still hold) stay: a restart
        // would otherwise find those copies unrecorded, with the newer ones they hid gone.
        if st.stale.iter().any(|(_, _, v)| v.slot.is_none()) {
            return;
        }
        let needed: Vec<u64> = st.stale.iter().filter_map(|(_, _, v)| v.slot).collect();
        for (slot, r) in self.records.iter_mut() {
            if r.target == target && r.writing == 0 && !needed.contains(slot) {
                r.collect = true;
            }
        }
    }

    pub(super) fn pump_record_gc(&mut self) {
        let todo: Vec<(u64, StoreIdx)> = self
            .records
            .iter()
            .filter(|(_, r)| r.collect && r.writing == 0)
            .flat_map(|(&slot, r)| indices(r.holders & !r.collecting).map(move |h| (slot, h)))
            .filter(|&(_, h)| self.stores[h].up)
            .collect();
        for (slot, h) in todo {
            let (len, version) = (self.records[&slot].bytes, self.records[&slot].version);
            self.records.get_mut(&slot).expect("record").collecting |= bit(h);
            let request = Request::Delete {
                client: companion(self.config.client),
                volume: self.config.volume,
                offset_bytes: slot << SLOT_SHIFT,
                length_bytes: len,
                version,
                generation: self.generation,
            };
            self.send(h, request, Pending::RecordGc { slot });
        }
        let empty: Vec<u64> = self
            .records
            .iter()
            .filter(|(_, r)| r.collect && r.holders == 0 && r.writing == 0)
            .map(|(&s, _)| s)
            .collect();
        for slot in empty {
            self.records.remove(&slot);
            self.settle_dirty = true;
            self.stats.deletion_records_collected += 1;
        }
    }
}
