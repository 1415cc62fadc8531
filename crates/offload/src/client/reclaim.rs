//! Reclaim: reading off-loaded data back from the stores to the base volume while it is
//! quiet, and settling each reclaimed range.

use super::*;

impl Client {
    pub(super) fn pump_reclaim(&mut self) {
        if !self.is_ready() || !self.base_available {
            return;
        }
        while self.reclaim_jobs < self.config.n_reclaim {
            // Vulnerable data (fewer than N copies available) first, under any policy and
            // any load: it is what keeps the superblock "degraded" (every restart waiting
            // for every store) until it is safe. Other data under the policy only; full
            // stores are reclaimed under load too (waiting for a quiet base volume would
            // stall every write that must be off-loaded).
            let others = self.reclaims_others()
                && (self.base_load() < self.config.t_base
                    || self.stores_full_since.is_some()
                    || self.near_offload_bound());
            if !others && self.vulnerable.is_empty() {
                break;
            }
            if let Some((lo, hi)) = self.vulnerable.pop_front() {
                let pieces: Vec<(u64, u64, Loc)> = self
                    .map
                    .lookup(lo, hi)
                    .into_iter()
                    .filter_map(|p| p.value.map(|l| (p.start, p.end, *l)))
                    .filter(|(_, _, l)| !l.on_base)
                    .collect();
                for (plo, phi, l) in pieces {
                    let replica = indices(l.stores)
                        .filter(|&s| self.stores[s].up)
                        .min_by_key(|&s| self.store_preference(s));
                    let Some(s) = replica else {
                        // No store holding it is up now: asked again later (dropped, it
                        // stayed at risk, and the superblock "degraded", until another
                        // failure queued it).
                        self.retry_vulnerable(plo, phi);
                        continue;
                    };
                    {
                        self.reclaim_jobs += 1;
                        self.vulnerable_jobs += 1;
                        self.stats.reclaim_reads += 1;
                        let request = Request::Read {
                            client: self.config.client,
                            offset_bytes: plo,
                            length_bytes: phi - plo,
                        };
                        self.send(
                            s,
                            request,
                            Pending::ReclaimRead {
                                start: plo,
                                end: phi,
                            },
                        );
                    }
                }
                continue;
            }
            if self.vulnerable_jobs > 0 || !others {
                break;
            }
            let urgent = self.urgent_reclaim();
            let n = self.stores.len();
            let pick = (0..n)
                .map(|k| (self.next_reclaim_store + k) % n)
                .find(|&s| self.may_ask_for_reclaim(s, urgent));
            let Some(s) = pick else {
                break;
            };
            self.next_reclaim_store = (s + 1) % n;
            self.reclaim_jobs += 1;
            self.stats.reclaim_reads += 1;
            let writes_acked = self.stores[s].writes_acked;
            self.send(
                s,
                Request::ReadAny {
                    client: self.config.client,
                },
                Pending::ReclaimAny { writes_acked },
            );
        }
    }

    /// Data read back for reclaim: the parts that are still the latest version are written to
    /// the base volume; the others are stale on this store and deleted. Returns whether any
    /// of it needed work (false: all of it is being settled or written already).
    /// `vulnerable`: the job reclaims vulnerable ranges (counted in `vulnerable_jobs` until it
    /// ends).
    pub(super) fn reclaim_got(
        &mut self,
        store: StoreIdx,
        pieces: Vec<(Extent, Vec<u8>)>,
        vulnerable: bool,
    ) -> bool {
        let mut useful = false;
        // (start, end, version, bytes, whether the local replica holds them: §3.6).
        let mut runs: Vec<(u64, u64, u64, Vec<u8>, bool)> = Vec::new();
        for (e, data) in pieces {
            let (lo, hi, v) = (e.offset_bytes, e.offset_bytes + e.length_bytes, e.version);
            if data.len() as u64 != e.length_bytes {
                if vulnerable {
                    self.retry_vulnerable(lo, hi);
                }
                continue;
            }
            if self.writes.values().any(|op| op.version == v) {
                // A write of ours still waiting for its other copies: the store answered it
                // already, the range map learns of it only once every copy is in. Neither
                // reclaimed nor stale yet; read_any offers it again later.
                continue;
            }
            let parts: Vec<(u64, u64, Option<Loc>)> = self.map_pieces(lo, hi);
            for (plo, phi, loc) in self.outside_reclaims(parts, vulnerable) {
                match loc {
                    Some(l) if l.version == v && l.stores & bit(store) != 0 => {
                        if l.on_base {
                            // Another reclaim got here first.
                            continue;
                        }
                        if self.up_write_in_flight(plo, phi) {
                            // An upper-layer write to the base volume, issued before this
                            // version, is still in flight there: the disk may let it land
                            // after a reclaim write, and the older data would win once the
                            // range reads from the base. Reclaimed once it is done.
                            if vulnerable {
                                self.vulnerable_after_base.push((plo, phi));
                            }
                            continue;
                        }
                        let bytes = &data[(plo - lo) as usize..(phi - lo) as usize];
                        match runs.last_mut() {
                            Some(run) if run.1 == plo && run.2 == v && run.4 == l.local => {
                                run.1 = phi;
                                run.3.extend_from_slice(bytes);
                            }
                            _ => runs.push((plo, phi, v, bytes.to_vec(), l.local)),
                        }
                    }
                    Some(l) if l.stores & bit(store) != 0 && l.version < v && !l.on_base => {
                        // A newer copy the map does not know of (a write whose outcome was
                        // unknown, still being retried or never acknowledged) hides the
                        // current one on this store, which will never be offered: adopt it,
                        // as recovery would. Reads may return it: its write is concurrent.
                        useful = true;
                        self.stores[store]
                            .stale
                            .update(plo, phi, |_, _, old| match old {
                                Some(x) if x.version <= v && !x.sent => None,
                                other => other.copied(),
                            });
                        self.apply_offloaded(plo, phi, v, bit(store));
                        self.vulnerable.push_back((plo, phi));
                        // One copy of what reads may now see: a restart must wait for this
                        // store (as after a recovery that adopts such a copy).
                        if self.config.n_way > 1 {
                            self.set_degraded();
                        }
                    }
                    _ => {
                        // Work only if its delete may go and is not already on its way (else
                        // read_any backs off: asking again only competes with the delete).
                        let sent = self.stores[store]
                            .stale
                            .lookup(plo, phi)
                            .iter()
                            .all(|p| p.value.is_some_and(|x| x.sent && x.version >= v));
                        useful |= !sent && self.delete_allowed(store, plo, phi, v);
                        self.add_stale(store, plo, phi, v);
                    }
                }
            }
        }
        if runs.is_empty() {
            self.reclaim_jobs -= 1;
            self.vulnerable_jobs -= vulnerable as usize;
            return useful;
        }
        let job = self.id();
        let count = runs.len() as u32;
        let mut done = Vec::with_capacity(runs.len());
        for (run, (lo, hi, v, data, local)) in runs.into_iter().enumerate() {
            let id = self.id();
            self.reclaiming.insert(lo, hi, job);
            self.base_pending.insert(id, BaseKind::Reclaim { job, run });
            self.base_in_flight += 1;
            if local {
                // The local replica holds these bytes: the other replicas only.
                self.stats.reclaim_local_bytes += hi - lo;
                self.base_out.push_back(BaseOp::Replicate {
                    id,
                    offset_bytes: lo,
                    data,
                });
            } else {
                self.local_write_issued(id, lo, hi);
                self.base_out.push_back(BaseOp::Write {
                    id,
                    offset_bytes: lo,
                    data,
                    durable: true,
                });
            }
            done.push((lo, hi, v));
        }
        self.reclaim_writes.insert(job, (done, count, vulnerable));
        true
    }

    /// The map's pieces with what reclaim writes in flight cover cut out: another job (or an
    /// older version's) writes those bytes, and a piece only partly under one is reclaimed
    /// for the rest (skipping the whole piece dropped the rest: found by the always-policy
    /// schedules, a range left with fewer than N copies and the volume "degraded" for
    /// good). A vulnerable job asks again later for the parts it leaves to the other job,
    /// which may fail or reclaim an older version there.
    fn outside_reclaims(
        &mut self,
        parts: Vec<(u64, u64, Option<Loc>)>,
        vulnerable: bool,
    ) -> Vec<(u64, u64, Option<Loc>)> {
        let mut out = Vec::with_capacity(parts.len());
        for (plo, phi, loc) in parts {
            if loc.is_none_or(|l| l.on_base) || !self.reclaiming.overlaps(plo, phi) {
                out.push((plo, phi, loc));
                continue;
            }
            let cut: Vec<(u64, u64, bool)> = self
                .reclaiming
                .lookup(plo, phi)
                .iter()
                .map(|p| (p.start, p.end, p.value.is_some()))
                .collect();
            for (a, b, taken) in cut {
                if !taken {
                    out.push((a, b, loc));
                } else if vulnerable {
                    self.retry_vulnerable(a, b);
                }
            }
        }
        out
    }

    /// Whether an upper-layer write to the base volume overlapping `[lo, hi)` is in flight.
    pub(super) fn up_write_in_flight(&self, lo: u64, hi: u64) -> bool {
        self.base_pending
            .values()
            .any(|k| matches!(k, BaseKind::UpWrite { start, end, .. } if *start < hi && lo < *end))
    }

    /// A reclaim write the base could not make whole: the run is given up (its range stays
    /// off-loaded, on the stores, and is reclaimed again later).
    /// A vulnerable range whose reclaim failed (its read, or its base write): queued again
    /// after a probe interval (not at once: a failing device would be asked in a loop).
    pub(super) fn retry_vulnerable(&mut self, lo: u64, hi: u64) {
        self.vulnerable_retry.push((lo, hi));
        self.vulnerable_retry_at
            .get_or_insert(self.now + self.config.probe_interval_ns);
    }

    pub(super) fn reclaim_failed(&mut self, job: u64, run: usize) {
        let entry = self.reclaim_writes.get_mut(&job).expect("reclaim job");
        let (lo, hi, _) = entry.0[run];
        if entry.2 {
            self.vulnerable_retry.push((lo, hi));
            self.vulnerable_retry_at
                .get_or_insert(self.now + self.config.probe_interval_ns);
        }
        let entry = self.reclaim_writes.get_mut(&job).expect("reclaim job");
        debug_assert!(entry.1 > 0, "reclaim job {job} failed after it finished");
        // An empty span settles nothing when the job completes.
        entry.0[run] = (lo, lo, 0);
        self.reclaiming.remove(lo, hi);
        self.stats.reclaims_failed += 1;
        self.reclaim_written(job);
    }

    /// A reclaim write reached the base volume (durably): the range reads from the base from now
    /// on, and its copies are deleted once every older copy is (invariant 3).
    pub(super) fn reclaim_written(&mut self, job: u64) {
        let entry = self.reclaim_writes.get_mut(&job).expect("reclaim job");
        entry.1 -= 1;
        if entry.1 > 0 {
            return;
        }
        let (runs, _, vulnerable) = self.reclaim_writes.remove(&job).expect("reclaim job");
        debug_assert!(
            self.reclaim_jobs >= 1 && self.vulnerable_jobs <= self.reclaim_jobs,
            "{} reclaim jobs finishing, {} of them at risk",
            self.reclaim_jobs,
            self.vulnerable_jobs
        );
        self.reclaim_jobs -= 1;
        self.vulnerable_jobs -= vulnerable as usize;
        let up = self.up_mask();
        let n_way = self.config.n_way;
        for (lo, hi, v) in runs.into_iter().filter(|(lo, hi, _)| lo < hi) {
            self.reclaiming.remove(lo, hi);
            let (mut written, mut holders, mut at_risk) = (0, 0, 0);
            self.map.update(lo, hi, |a, b, old| {
                old.map(|l| {
                    if l.version == v && !l.on_base {
                        written += b - a;
                        if ((l.stores & up).count_ones() as usize) < n_way {
                            at_risk += b - a;
                        }
                        holders |= l.stores;
                        Loc {
                            on_base: true,
                            ..*l
                        }
                    } else {
                        *l
                    }
                })
            });
            self.stats.reclaimed_bytes += written;
            self.stats.reclaimed_at_risk_bytes += at_risk;
            if written > 0 {
                // Deletes held back by this copy (on the stores holding it) may go now.
                for s in indices(holders) {
                    let st = &mut self.stores[s];
                    st.stale_dirty |= !st.stale.is_empty();
                }
                self.settling.push(Settle {
                    start: lo,
                    end: hi,
                    version: v,
                    deleting: false,
                });
                self.settle_dirty = true;
            }
        }
    }

    /// Advances reclaims waiting on deletes: once no older copy remains, the copies of the
    /// reclaimed version are deleted; once those are gone too, the range leaves the map.
    pub(super) fn pump_settle(&mut self) {
        let mut changed = false;
        let mut i = 0;
        while i < self.settling.len() {
            let Settle {
                start,
                end,
                version,
                deleting,
            } = self.settling[i];
            // The parts still holding this version (newer writes may have taken the rest).
            let parts: Vec<(u64, u64, u64)> = self
                .map
                .lookup(start, end)
                .into_iter()
                .filter_map(|p| {
                    p.value
                        .filter(|l| l.version == version && l.on_base)
                        .map(|l| (p.start, p.end, l.stores))
                })
                .collect();
            if !deleting {
                // Invariant 3: every older copy is gone (or goes with this version's own
                // delete: on a store holding this version, deleting it deletes every older
                // copy there too); the highest version may go now.
                if parts
                    .iter()
                    .any(|&(lo, hi, stores)| self.older_copies_elsewhere(lo, hi, version, stores))
                {
                    i += 1;
                    continue;
                }
                for &(lo, hi, stores) in &parts {
                    for s in indices(stores) {
                        self.add_stale(s, lo, hi, version);
                    }
                }
                self.settling[i].deleting = true;
                changed = true;
                i += 1;
                continue;
            }
            if parts.iter().any(|&(lo, hi, _)| self.blocking_stale(lo, hi)) {
                i += 1;
                continue;
            }
            let mut removed = 0;
            for &(lo, hi, _) in &parts {
                self.map.update(lo, hi, |a, b, old| match old {
                    Some(l) if l.version == version && l.on_base => {
                        removed += b - a;
                        None
                    }
                    old => old.copied(),
                });
            }
            self.stats.offloaded_bytes -= removed;
            self.settling.swap_remove(i);
            changed = true;
        }
        // What changed here may unblock other entries: look once more at the next pump.
        self.settle_dirty |= changed;
    }

    /// Whether reclaim may run under the policy: Everest's peak policy, or Sierra's logging
    /// mode with every replica available.
    /// Whether data not at risk is reclaimed: under the policy, or near an off-load bound
    /// under any policy that off-loads.
    /// Reclaim that must go on whatever the stores' load: the stores are full, or the
    /// off-load bound is near.
    pub(super) fn urgent_reclaim(&self) -> bool {
        self.stores_full_since.is_some() || self.near_offload_bound()
    }

    /// Whether store `s` may be sent one more read_any. Urgent reclaim asks any store that may
    /// hold data; reclaim of a quiet base volume asks only a lightly-loaded one (Everest
    /// §3.2.3: "each lightly-loaded store returns valid data"), so a client does not take a
    /// busy volume's disk time to empty its store there. The load that counts is the volume's
    /// beside the store on its disk (not the store's own queue, which holds this client's
    /// reclaim reads: those would hold reclaim back at a store on an idle disk): with a volume
    /// busy there, this client's read_any in flight and the volume's operations stay under
    /// T_store; on a disk of its own (no volume load), up to the window. One read_any may
    /// always be in flight: its answer brings the load up to date.
    pub(super) fn may_ask_for_reclaim(&self, s: StoreIdx, urgent: bool) -> bool {
        let st = &self.stores[s];
        let lightly_loaded = || {
            st.any_in_flight == 0
                || st.volume_load == 0
                || st.volume_load + st.any_in_flight < self.config.t_store
        };
        st.up
            && st.may_hold
            && st.reclaim_after <= self.now
            && st.any_in_flight < st.any_window
            && (urgent || lightly_loaded())
    }

    pub(super) fn reclaims_others(&self) -> bool {
        self.reclaims()
            || (self.config.policy != Policy::Baseline
                && self.base_available
                && self.near_offload_bound())
    }

    pub(super) fn reclaims(&self) -> bool {
        match self.config.policy {
            Policy::Peak => true,
            Policy::WhileBaseUnavailable => self.base_available,
            Policy::Baseline | Policy::Always => false,
        }
    }
}
