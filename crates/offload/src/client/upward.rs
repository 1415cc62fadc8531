//! Upward requests: writes (to the base volume, or off-loaded to stores with their versions,
//! their copies in `copies.rs`); reads are in `reads.rs`.

use super::*;

impl Client {
    pub(super) fn upward_step(&mut self, now: Nanos, id: u64, request: Upward) {
        self.now = now;
        let (offset, len) = match &request {
            Upward::Read {
                offset_bytes,
                length_bytes,
            } => (*offset_bytes, *length_bytes),
            Upward::Write {
                offset_bytes, data, ..
            } => (*offset_bytes, data.len() as u64),
        };
        let in_range = len > 0
            && offset
                .checked_add(len)
                .is_some_and(|end| end <= self.config.usable_bytes());
        if !in_range {
            self.upward_out
                .push_back((id, UpReply::Error(ClientError::BadRequest)));
            return;
        }
        match &self.phase {
            Phase::Ready => self.start_upward(id, request),
            Phase::Failed(e) => self
                .upward_out
                .push_back((id, UpReply::Error(ClientError::NoStoreSet(*e)))),
            Phase::Fenced => self
                .upward_out
                .push_back((id, UpReply::Error(ClientError::Fenced))),
            _ => self.queued_upward.push_back((id, request)),
        }
        self.pump();
    }

    pub(super) fn start_upward(&mut self, id: u64, request: Upward) {
        match request {
            Upward::Read {
                offset_bytes,
                length_bytes,
            } => self.start_read(id, offset_bytes, length_bytes),
            Upward::Write {
                offset_bytes,
                data,
                durable,
            } => self.start_write(id, offset_bytes, data, durable),
        }
    }

    /// Whether a store may hold a copy of some byte of the range that is not deleted for sure:
    /// then a new write there must be off-loaded (invariant 2, extended to copies whose fate is
    /// unknown, e.g. writes that timed out).
    pub(super) fn blocking_stale(&self, start: u64, end: u64) -> bool {
        // No holder: every copy not deleted for sure stays behind.
        self.older_copies_elsewhere(start, end, u64::MAX, 0)
    }

    /// Whether a copy in `[start, end)` that is not deleted for sure stays behind when
    /// `version` is deleted from `holders`: one on another store, or a newer one.
    pub(super) fn older_copies_elsewhere(
        &self,
        start: u64,
        end: u64,
        version: u64,
        holders: u64,
    ) -> bool {
        self.stores.iter().enumerate().any(|(i, s)| {
            !s.stale.is_empty()
                && s.stale.lookup(start, end).iter().any(|p| {
                    p.value.is_some_and(|v| {
                        v.slot.is_none() && (holders & bit(i) == 0 || v.version > version)
                    })
                })
        })
    }

    /// Whether an off-loaded write other than `except` is in flight over `[start, end)`: a newer
    /// write there is off-loaded too, so that versions, not completion order, decide which one
    /// the range map keeps (a base write completing first would be hidden by the older
    /// off-loaded one when it completes).
    pub(super) fn offloaded_in_flight(&self, start: u64, end: u64, except: Option<u64>) -> bool {
        self.writes.iter().any(|(&key, op)| {
            Some(key) != except && op.start < end && start < op.start + op.data.len() as u64
        })
    }

    pub(super) fn start_write(&mut self, up_id: u64, start: u64, data: Vec<u8>, durable: bool) {
        let end = start + data.len() as u64;
        let must = self.map.overlaps(start, end)
            || self.blocking_stale(start, end)
            || self.offloaded_in_flight(start, end, None);
        let offload = match self.config.policy {
            Policy::Baseline => must,
            Policy::Always => true,
            Policy::WhileBaseUnavailable => must || !self.base_available,
            Policy::Peak => {
                must || {
                    let base = self.base_load();
                    base > self.config.t_base
                        && self.lightly_loaded_servers(base) >= self.config.n_way.max(1)
                }
            }
        };
        if !offload {
            self.write_base(up_id, start, data, durable);
            return;
        }
        let version = self.next_version();
        // Invariant 2: the new version is above every version off-loaded in the range.
        debug_assert!(self
            .map
            .lookup(start, end)
            .iter()
            .all(|p| p.value.is_none_or(|l| l.version < version)));
        let key = self.id();
        self.writes.insert(
            key,
            WriteOp {
                up_id,
                start,
                data,
                durable,
                version,
                waiting: 0,
                succeeded: 0,
                tried: 0,
                asked: 0,
                superseded: Vec::new(),
                full_since: None,
                short_since: None,
                answered: false,
                arrived: self.now,
            },
        );
        self.place_write(key);
    }

    /// A write of `version` over `[start, end)` is in the range map: off-loaded writes with
    /// older versions still in flight there lose those bytes to it (it may be reclaimed and
    /// leave the map before they complete; deletes owed for it may remove their copies).
    pub(super) fn supersede(&mut self, start: u64, end: u64, version: u64) {
        for op in self.writes.values_mut() {
            if op.version > version {
                continue;
            }
            let (lo, hi) = (
                op.start.max(start),
                (op.start + op.data.len() as u64).min(end),
            );
            if lo < hi {
                op.superseded.push((lo, hi));
            }
        }
    }

    /// Servers with an available store loaded below T_store and below the base volume's
    /// `base`: a peak off-loads only when there are N of them (Everest §3.2.2, §4.2: with 2-way
    /// off-load and one idle store, "neither Everest client can find two lightly loaded Everest
    /// stores and hence no off-loading occurs").
    pub(super) fn lightly_loaded_servers(&self, base: u64) -> usize {
        let mut servers: Vec<u64> = self
            .stores
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                let load = self.store_load(*i);
                s.up && !s.removed && load < self.config.t_store && load < base
            })
            .map(|(_, s)| s.info.server)
            .collect();
        servers.sort_unstable();
        servers.dedup();
        servers.len()
    }

    /// Up to `n` available stores on different servers, least loaded first, not in `exclude`.
    pub(super) fn choose_stores(&self, n: usize, exclude: u64) -> Vec<StoreIdx> {
        let mut candidates: Vec<((u8, u64, StoreIdx), StoreIdx)> = self
            .stores
            .iter()
            .enumerate()
            .filter(|(i, s)| s.up && !s.removed && exclude & bit(*i) == 0)
            .map(|(i, _)| (self.store_preference(i), i))
            .collect();
        candidates.sort_unstable();
        let mut chosen: Vec<StoreIdx> = Vec::with_capacity(n);
        for (_, i) in candidates {
            if chosen.len() == n {
                break;
            }
            let server = self.stores[i].info.server;
            if chosen.iter().all(|&c| self.stores[c].info.server != server) {
                chosen.push(i);
            }
        }
        debug_assert!(chosen.len() <= n, "{} stores chosen of {n}", chosen.len());
        debug_assert!(
            chosen.iter().all(|&c| exclude & bit(c) == 0),
            "a store chosen that was excluded"
        );
        chosen
    }

    pub(super) fn write_base(&mut self, up_id: u64, start: u64, data: Vec<u8>, durable: bool) {
        let id = self.id();
        let end = start + data.len() as u64;
        // Invariant 2's other side: a write over off-loaded data never goes to the base alone
        // (the off-loaded copy would stay newer than it in the map).
        debug_assert!(
            !self.map.overlaps(start, end),
            "a base write of [{start}, {end}) over off-loaded data"
        );
        self.local_write_issued(id, start, end);
        self.base_pending
            .insert(id, BaseKind::UpWrite { up_id, start, end });
        self.base_in_flight += 1;
        self.stats.base_writes += 1;
        self.base_out.push_back(BaseOp::Write {
            id,
            offset_bytes: start,
            data,
            durable,
        });
    }

    /// Sends an off-loaded write to N stores (fewer if fewer are available). With none: to the
    /// base volume if nothing forces the range to stay off-loaded, else parked until a store
    /// returns.
    pub(super) fn place_write(&mut self, key: u64) {
        let op = &self.writes[&key];
        let (start, end) = (op.start, op.start + op.data.len() as u64);
        let must_offload = self.map.overlaps(start, end)
            || self.blocking_stale(start, end)
            || self.offloaded_in_flight(start, end, Some(key))
            || (self.config.policy == Policy::WhileBaseUnavailable && !self.base_available);
        let tried = op.tried;
        let total_room = self.bound_total_room(key);
        let over_bound = self.bound_excluded(key);
        let targets = if total_room {
            self.choose_stores(self.config.n_way, tried | over_bound)
        } else {
            Vec::new()
        };
        // The off-load bound keeps it from N stores that could take it.
        let bounded = !total_room
            || (over_bound != 0
                && targets.len() < self.config.n_way
                && self.choose_stores(self.config.n_way, tried).len() > targets.len());
        if bounded {
            self.stats.bound_writes += 1;
        }
        // A write that must stay off-loaded and that the bound keeps from N stores waits for
        // reclaim to make room for N copies: sent to fewer, its missing copies would meet the
        // bound again and the write go round (seed 8201585296872031873: 7.5 s of one store's
        // copy sent, made stale and sent again under a fresh version).
        let targets = if bounded && must_offload && targets.len() < self.config.n_way {
            Vec::new()
        } else {
            targets
        };
        if !targets.is_empty() && targets.len() < self.config.n_way && !must_offload {
            // Fewer than N stores available: N copies cannot be had now, and the base volume
            // can take it (nothing older is off-loaded there).
            let op = self.writes.remove(&key).expect("write");
            self.write_moved(op.start, op.start + op.data.len() as u64);
            self.write_base(op.up_id, op.start, op.data, op.durable);
            return;
        }
        if targets.is_empty() {
            let op = &self.writes[&key];
            // Stores at the off-load bound count as full ones: reclaim runs under load, and a
            // write that must stay off-loaded waits for it.
            let refused_by_live_stores = bounded
                || (op.tried != 0
                    && indices(op.tried).all(|i| self.stores[i].up && !self.stores[i].removed));
            let now = self.now;
            let full_since = if must_offload && refused_by_live_stores {
                self.stores_full_since.get_or_insert(now);
                *self
                    .writes
                    .get_mut(&key)
                    .expect("write")
                    .full_since
                    .get_or_insert(now)
            } else {
                now
            };
            let waited_enough = now.saturating_sub(full_since) >= self.config.full_timeout_ns;
            // Under the always policy nothing else frees a full store (nothing is reclaimed),
            // but the bound's reclaim does.
            if must_offload
                && refused_by_live_stores
                && ((self.config.policy == Policy::Always && !bounded) || waited_enough)
            {
                let op = self.writes.remove(&key).expect("write");
                self.write_moved(op.start, op.start + op.data.len() as u64);
                self.stats.refused_writes += 1;
                self.upward_out
                    .push_back((op.up_id, UpReply::Error(ClientError::NoSpace)));
            } else if must_offload {
                self.parked_writes.push(key);
                self.parked_retry_at
                    .get_or_insert(self.now + self.config.probe_interval_ns);
            } else {
                let op = self.writes.remove(&key).expect("write");
                self.write_moved(op.start, op.start + op.data.len() as u64);
                self.write_base(op.up_id, op.start, op.data, op.durable);
            }
            return;
        }
        self.send_copies(key, &targets);
    }

    /// Whether write `key` fits the total off-load bound ([`Config::offload_bytes_max`]): the
    /// bytes of its range not off-loaded yet, over those of the map and of the other writes
    /// in flight (each counted whole).
    fn bound_total_room(&self, key: u64) -> bool {
        let Some(max) = self.config.offload_bytes_max else {
            return true;
        };
        let op = &self.writes[&key];
        let added = self.bytes_added(op.start, op.data.len() as u64, None);
        let in_flight: u64 = self
            .writes
            .iter()
            .filter(|(&k, _)| k != key)
            .map(|(_, w)| w.data.len() as u64)
            .sum();
        self.map.unreclaimed_bytes() + in_flight + added <= max
    }

    /// The stores where a copy of write `key` would pass their off-load bound
    /// ([`Config::offload_bytes_max_per_store`]), counting the other writes in flight to them.
    pub(super) fn bound_excluded(&self, key: u64) -> u64 {
        let Some(max) = self.config.offload_bytes_max_per_store else {
            return 0;
        };
        let op = &self.writes[&key];
        let mut excluded = 0;
        for s in 0..self.stores.len() {
            let in_flight: u64 = self
                .writes
                .iter()
                .filter(|(&k, w)| k != key && (w.succeeded | w.asked) & bit(s) != 0)
                .map(|(_, w)| w.data.len() as u64)
                .sum();
            let added = self.bytes_added(op.start, op.data.len() as u64, Some(s));
            if self.map.held_bytes(s) + in_flight + added > max {
                excluded |= bit(s);
            }
        }
        excluded
    }

    /// The bytes of `[start, start + len)` not off-loaded yet (not reclaimed), or, for
    /// `Some(store)`, whose latest version that store does not hold.
    fn bytes_added(&self, start: u64, len: u64, store: Option<StoreIdx>) -> u64 {
        let present: u64 = self
            .map
            .lookup(start, start + len)
            .iter()
            .filter(|p| {
                p.value
                    .is_some_and(|l| !l.on_base && store.is_none_or(|s| l.stores & bit(s) != 0))
            })
            .map(|p| p.end - p.start)
            .sum();
        len - present
    }

    /// Whether the map is within 10 % of an off-load bound, in total or on a store: reclaim
    /// then runs whatever the base volume's load, under any policy that off-loads.
    pub(super) fn near_offload_bound(&self) -> bool {
        let near = |used: u64, max: u64| used.saturating_mul(10) >= max.saturating_mul(9);
        self.config
            .offload_bytes_max
            .is_some_and(|max| near(self.map.unreclaimed_bytes(), max))
            || self.config.offload_bytes_max_per_store.is_some_and(|max| {
                (0..self.stores.len()).any(|s| near(self.map.held_bytes(s), max))
            })
    }

    /// Every store asked answered an off-loaded write that some took: into the range map
    /// (where no newer write superseded it) and answered — written with N copies, or an error
    /// after `copies_timeout_ns` with fewer.
    pub(super) fn finish_write(&mut self, key: u64) {
        let op = self.writes.remove(&key).expect("write");
        self.write_moved(op.start, op.start + op.data.len() as u64);
        let (start, end) = (op.start, op.start + op.data.len() as u64);
        // The parts a later write superseded are stale on every store that took them.
        let kept: Vec<(u64, u64)> = if op.superseded.is_empty() {
            vec![(start, end)]
        } else {
            let mut kept: RangeMap<()> = RangeMap::new();
            kept.insert(start, end, ());
            for &(lo, hi) in &op.superseded {
                kept.remove(lo, hi);
                for s in indices(op.succeeded) {
                    self.add_stale(s, lo, hi, op.version);
                }
            }
            kept.iter().map(|(lo, hi, _)| (lo, hi)).collect()
        };
        // Fewer than N copies (answered with an error): reclaimed first.
        let short = (op.succeeded.count_ones() as usize) < self.config.n_way;
        // So is one with N whose store failed while the write waited for another copy: that
        // failure found the range map without it (seed 915130).
        let vulnerable =
            ((op.succeeded & self.up_mask()).count_ones() as usize) < self.config.n_way;
        // Acknowledged means N copies: a write short of them was answered with an error.
        debug_assert!(
            op.answered || !short,
            "[{start}, {end}) version {} acknowledged with {} copies of {}",
            op.version,
            op.succeeded.count_ones(),
            self.config.n_way
        );
        debug_assert!(op.succeeded != 0, "a write finished with no copy");
        for (lo, hi) in kept {
            self.apply_offloaded(lo, hi, op.version, op.succeeded);
            if vulnerable {
                self.vulnerable.push_back((lo, hi));
            }
        }
        // A newer write took some of these bytes while this one was in flight (answered with
        // an error and held for the superblock's "degraded" mark, say): they may already be on
        // the local replica, or reclaimed to it, and the older bytes must not land over them
        // (sierra seed 5929858340065061311). Copies are only for whole writes.
        if op.superseded.is_empty() {
            self.copy_locally(key, start, op.version, op.data.clone());
        }
        self.supersede(start, end, op.version);
        self.stats.offloaded_writes += 1;
        self.stats.offloaded_write_bytes += end - start;
        for s in indices(op.succeeded) {
            self.stores[s].may_hold = true;
            self.stores[s].writes_acked += 1;
            // Deletes held back while this write was in flight (see `delete_refusal`) are
            // looked at again.
            self.stores[s].stale_dirty = true;
        }
        if !op.answered {
            self.upward_out.push_back((op.up_id, UpReply::Written));
        }
    }

    /// Records that `[start, end)` now has `version` on `stores`; older copies elsewhere become
    /// stale (deleted later); a newer version already there keeps its place.
    pub(super) fn apply_offloaded(&mut self, start: u64, end: u64, version: u64, stores: u64) {
        let mut stale: Vec<(StoreIdx, u64, u64, u64)> = Vec::new();
        let mut gained = 0u64;
        self.settle_dirty |= !self.settling.is_empty();
        self.map.update(start, end, |lo, hi, old| match old {
            Some(o) if o.version > version => {
                stale.extend(indices(stores & !o.stores).map(|s| (s, lo, hi, version)));
                Some(*o)
            }
            Some(o) if o.version == version => Some(Loc {
                stores: o.stores | stores,
                ..*o
            }),
            Some(o) => {
                stale.extend(indices(o.stores & !stores).map(|s| (s, lo, hi, o.version)));
                Some(Loc {
                    version,
                    stores,
                    on_base: false,
                    local: false,
                })
            }
            None => {
                gained += hi - lo;
                Some(Loc {
                    version,
                    stores,
                    on_base: false,
                    local: false,
                })
            }
        });
        self.stats.offloaded_bytes += gained;
        debug_assert!(
            self.map
                .lookup(start, end)
                .iter()
                .all(|p| p.value.is_some_and(|l| l.version >= version)),
            "[{start}, {end}) left below version {version} after it was applied"
        );
        for (s, lo, hi, v) in stale {
            self.add_stale(s, lo, hi, v);
        }
        // A store owed the delete of a newer copy there (a newer write's copy left by its
        // retry under a fresh version, or whose outcome was unknown) may keep that copy over
        // this one: a later write took it first, and then failed.
        for s in indices(stores) {
            let st = &self.stores[s];
            if st.stale.is_empty() {
                continue;
            }
            let newer: Vec<(u64, u64, u64)> = st
                .stale
                .lookup(start, end)
                .iter()
                .filter_map(|p| p.value.map(|x| (p.start, p.end, x.version)))
                .filter(|&(.., v)| v > version)
                .collect();
            for (lo, hi, v) in newer {
                self.copy_hidden(s, lo, hi, v, false);
            }
        }
    }

    /// A write over `[start, end)` left the writes in flight, or went again under a fresh
    /// version: deletes over its range that waited for it (invariant 1 for the copies it
    /// counted on, invariant 3 for an older write that could still land elsewhere) are looked
    /// at again, on every store.
    pub(super) fn write_moved(&mut self, start: u64, end: u64) {
        for st in &mut self.stores {
            if !st.stale_dirty && !st.stale.is_empty() && st.stale.overlaps(start, end) {
                st.stale_dirty = true;
            }
        }
    }

    /// The range map over `[start, end)`, piece by piece (`None`: on the base volume only).
    pub(super) fn map_pieces(&self, start: u64, end: u64) -> Vec<(u64, u64, Option<Loc>)> {
        self.map
            .lookup(start, end)
            .into_iter()
            .map(|p| (p.start, p.end, p.value.copied()))
            .collect()
    }
}
