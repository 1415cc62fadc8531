//! Recovery: reading the store set, asking every store for its metadata and deletion
//! records, and rebuilding the range map.

use super::*;

impl Client {
    pub(super) fn superblock_read(&mut self, data: &[u8]) {
        match Superblock::decode(data) {
            Err(e) => {
                self.phase = Phase::Failed(e);
                while let Some((id, _)) = self.queued_upward.pop_front() {
                    self.upward_out
                        .push_back((id, UpReply::Error(ClientError::NoStoreSet(e))));
                }
            }
            Ok(sb) => {
                self.generation = sb.generation + 1;
                self.degraded = sb.degraded;
                self.degraded_durable = sb.degraded;
                self.next_counter = 1;
                self.stores = sb
                    .stores
                    .into_iter()
                    .map(|info| new_store_state(info, self.now))
                    .collect();
                let n = self.stores.len();
                self.phase = Phase::Fetching(Fetch {
                    superblock_written: false,
                    all_needed: sb.degraded,
                    metadata: vec![None; n],
                    records: vec![None; n],
                    retry_at: vec![None; n],
                    failed: vec![false; n],
                    started: self.now,
                });
                self.write_superblock();
                for s in 0..n {
                    self.fetch_from(s);
                }
                self.maybe_finish_fetch();
            }
        }
    }

    pub(super) fn fetch_from(&mut self, s: StoreIdx) {
        let Phase::Fetching(f) = &self.phase else {
            return;
        };
        let (need_meta, need_records) = (f.metadata[s].is_none(), f.records[s].is_none());
        let waiting = self.outstanding.values().any(|o| {
            o.store == s
                && matches!(
                    o.pending,
                    Pending::Metadata | Pending::RecordsMeta | Pending::Records
                )
        });
        if waiting {
            return;
        }
        if need_meta {
            self.send(
                s,
                Request::Metadata {
                    client: self.config.client,
                    generation: self.generation,
                },
                Pending::Metadata,
            );
        }
        if need_records {
            self.send(
                s,
                Request::Metadata {
                    client: companion(self.config.client),
                    generation: self.generation,
                },
                Pending::RecordsMeta,
            );
        }
    }

    /// Finishes recovery once every store answered, or once the grace period is over and the
    /// stores that did not answer (each failed at least once) are few enough that every
    /// acknowledged write has a copy among those that did.
    pub(super) fn maybe_finish_fetch(&mut self) {
        let Phase::Fetching(f) = &self.phase else {
            return;
        };
        if !f.superblock_written {
            return;
        }
        let missing: Vec<StoreIdx> = (0..self.stores.len())
            .filter(|&s| f.metadata[s].is_none() || f.records[s].is_none())
            .collect();
        if !missing.is_empty() {
            let graced = self.now >= f.started + self.config.recovery_grace_ns;
            let tolerable = !f.all_needed && missing.len() < self.config.n_way;
            if !(graced && tolerable && missing.iter().all(|&s| f.failed[s])) {
                return;
            }
            // Their copies become stale: ranges they held have fewer than N copies until
            // reclaimed, so a later restart must not go on without the others.
            if !self.degraded_is_durable() {
                self.set_degraded();
                return;
            }
        }
        let Phase::Fetching(f) = std::mem::replace(&mut self.phase, Phase::Ready) else {
            unreachable!()
        };
        self.merge(f);
        if !self.vulnerable.is_empty() && !self.degraded_is_durable() {
            // Data reads would see has fewer than N copies: a later restart must wait for
            // every store, so the mark is durable before the first read sees that data.
            self.phase = Phase::Marking;
            self.set_degraded();
            return;
        }
        self.become_ready();
    }

    /// Rebuilds the soft state: deletion records first (what is owed to whom), then every
    /// store's valid ranges merged by version.
    ///
    /// A store that did not answer is failed from the start, and everything it may hold from
    /// earlier lives is stale: the map is built without it (every acknowledged write has a copy
    /// elsewhere), so any copy there is older than the map's or was never acknowledged. One
    /// stale entry over the whole volume, up to the last version of earlier lives, stands for
    /// it: until a deletion record of it is durable (written at once, like any failed store's)
    /// it blocks deletes of current copies and sends writes to stores (invariants 2 and 3), and
    /// when the store returns one delete clears it.
    pub(super) fn merge(&mut self, mut f: Fetch) {
        let n = self.stores.len();
        let missing: Vec<bool> = (0..n)
            .map(|s| f.metadata[s].is_none() || f.records[s].is_none())
            .collect();
        for (s, _) in missing.iter().enumerate().filter(|(_, &m)| m) {
            f.metadata[s] = None;
            f.records[s] = None;
        }
        let owed = self.read_records(std::mem::take(&mut f.records));
        let earlier_lives = (self.generation << VERSION_BITS) - 1;
        let usable = self.config.usable_bytes();
        for (s, missing) in missing.iter().enumerate() {
            if !missing || self.stores[s].removed {
                continue;
            }
            let st = &mut self.stores[s];
            st.up = false;
            st.down_since = self.now;
            st.next_probe = self.now;
            st.may_hold = true;
            self.stats.store_failures += 1;
            st.old_records = Some((earlier_lives, false));
            self.add_stale(s, 0, usable, earlier_lives);
        }
        for (s, extents) in f.metadata.into_iter().enumerate() {
            let Some(extents) = extents else { continue };
            self.stores[s].may_hold = !extents.is_empty();
            for e in extents {
                let (lo, hi, v) = (e.offset_bytes, e.offset_bytes + e.length_bytes, e.version);
                // (start, end, the (version, slot if durable) of a deletion record covering it).
                type Owed = (u64, u64, Option<(u64, Option<u64>)>);
                let parts: Vec<Owed> = owed[s]
                    .lookup(lo, hi)
                    .into_iter()
                    .map(|p| (p.start, p.end, p.value.copied()))
                    .collect();
                for (plo, phi, del) in parts {
                    match del {
                        Some((dv, slot)) if dv >= v => {
                            self.stores[s].stale.update(plo, phi, |_, _, _| {
                                Some(Stale {
                                    version: v,
                                    sent: false,
                                    recording: false,
                                    slot,
                                })
                            });
                        }
                        _ => self.apply_offloaded(plo, phi, v, bit(s)),
                    }
                }
            }
            self.stores[s].stale_dirty = true;
        }
        for s in 0..n {
            self.maybe_collect_records(s);
        }
        let vulnerable: Vec<(u64, u64)> = self
            .map
            .iter()
            .filter(|(_, _, l)| (l.stores.count_ones() as usize) < self.config.n_way)
            .map(|(a, b, _)| (a, b))
            .collect();
        self.vulnerable.extend(vulnerable);
    }

    /// Reads the deletion records every answering store holds: per store, the newest record
    /// covering each range, as (version up to, the record's slot if it is durable). Also
    /// registers each record slot (`records`), to be collected or kept, and moves
    /// `next_slot` past every slot in use.
    fn read_records(
        &mut self,
        records: Vec<Option<Vec<Piece>>>,
    ) -> Vec<RangeMap<(u64, Option<u64>)>> {
        let n = self.stores.len();
        let mut owed: Vec<RangeMap<(u64, Option<u64>)>> = vec![RangeMap::new(); n];
        let mut copies: Vec<(StoreIdx, Extent, DeletionRecord)> = Vec::new();
        for (holder, pieces) in records.into_iter().enumerate() {
            for (e, data) in pieces.unwrap_or_default() {
                self.next_slot = self.next_slot.max((e.offset_bytes >> SLOT_SHIFT) + 1);
                if let Some(record) = DeletionRecord::decode(&data) {
                    copies.push((holder, e, record));
                }
            }
        }
        // Newest first: a record of life g that says a store holds nothing of earlier lives
        // (that life recovered without it) voids the copies of records that store holds from
        // before g. That life never read them, and may have made current what they call stale
        // (a record not yet durable when its life ended, held by that store alone); a durable
        // record has another copy, read by that life. The void copies are deleted when the store
        // is up, before the record voiding them may go (`old_records`). A record voids only
        // copies of older lives than its own, all after it in this order.
        copies.sort_by_key(|(_, e, _)| std::cmp::Reverse(e.version));
        let mut void_up_to = vec![0u64; n];
        // The copies not void, each with its target's index.
        let mut kept = Vec::with_capacity(copies.len());
        for (holder, e, record) in copies {
            if e.version <= void_up_to[holder] {
                let st = &mut self.stores[holder];
                let up_to = st.old_records.map_or(0, |(v, _)| v).max(void_up_to[holder]);
                st.old_records = Some((up_to, false));
                self.stats.deletion_records_void += 1;
                continue;
            }
            let earlier_lives = ((e.version >> VERSION_BITS) << VERSION_BITS).checked_sub(1);
            let marks = |&(_, _, v): &(u64, u64, u64)| Some(v) == earlier_lives;
            let target = self
                .stores
                .iter()
                .position(|s| !s.removed && s.info.id == record.target);
            if let (Some(t), true) = (target, record.entries.iter().any(marks)) {
                void_up_to[t] = void_up_to[t].max(earlier_lives.unwrap_or(0));
            }
            kept.push((holder, e, record, target));
        }
        // A record is durable once N stores hold it (`record_written`). Found on fewer (void
        // copies not counted: a later life ignores them too), it may be one whose life ended
        // before it was: a later life that does not read the stores holding it would not know
        // of it. Its copies are stale all the same (a record names only copies its life found
        // stale), but unrecorded: they hold back base writes over them and deletes of the
        // current copies until they are deleted or recorded again, durably — as if this life
        // had found them stale itself. Holders are counted as a set: a store reporting one
        // record twice must not count twice.
        let mut holders_of: FxHashMap<(u64, u64), u64> = FxHashMap::default();
        for (holder, e, _, _) in &kept {
            *holders_of
                .entry((e.offset_bytes >> SLOT_SHIFT, e.version))
                .or_default() |= bit(*holder);
        }
        let n_way = self.config.n_way as u32;
        for (holder, e, record, target) in kept {
            let slot = e.offset_bytes >> SLOT_SHIFT;
            let info = self.records.entry(slot).or_insert(DelRecordInfo {
                target: target.unwrap_or(usize::MAX),
                version: e.version,
                bytes: e.length_bytes,
                holders: 0,
                writing: 0,
                entries: record.entries.clone(),
                collecting: 0,
                collect: target.is_none(),
            });
            info.holders |= bit(holder);
            info.version = info.version.max(e.version);
            // Records of two lives at one slot (a slot reused after a recovery that did
            // not read a store holding the older one): the collection covers both.
            info.bytes = info.bytes.max(e.length_bytes);
            let durable = holders_of[&(slot, e.version)].count_ones() >= n_way;
            if !durable {
                self.stats.deletion_records_short += 1;
            }
            let recorded = durable.then_some(slot);
            if let Some(t) = target {
                for &(lo, hi, v) in &record.entries {
                    owed[t].update(lo, hi, |_, _, old| match old {
                        // The newer record wins; of two up to one version, a durable one.
                        Some(&(ov, os))
                            if ov > v || (ov == v && (os.is_some() || recorded.is_none())) =>
                        {
                            Some((ov, os))
                        }
                        _ => Some((v, recorded)),
                    });
                }
            }
        }
        debug_assert!(
            self.records.keys().all(|&slot| slot < self.next_slot),
            "a record slot in use at or past next_slot would be written over"
        );
        owed
    }
}
