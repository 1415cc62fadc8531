//! The off-loading client core (Everest §3.2): a sans-I/O state machine between an upper layer
//! issuing block reads and writes, its base volume, and the stores of its store set.
//!
//! # Driver contract
//!
//! ```text
//! let mut c = Client::format(config, stores, now)    // new volume: writes the store set
//!          or Client::recover(config, now)           // restart: reads it, asks every store
//! loop {
//!     while let Some(op) = c.poll_base()   { base volume ← op }        // reads, writes (durable?); with
//!                                                                      // local copies, writes to the local
//!                                                                      // replica or to the others only
//!     while let Some((store, id, request)) = c.poll_store() { send to store }
//!     while let Some((id, reply)) = c.poll_upward() { answer the upper layer }
//!     wait for: an upward request      → c.handle_upward(now, id, request)
//!               a base completion      → c.handle_base(now, done)
//!               a store reply          → c.handle_store(now, store, id, reply, load)
//!               a load broadcast       → c.handle_load(store, load)
//!               c.poll_timeout()       → c.handle_timeout(now)
//! }
//! ```
//!
//! # Its face
//!
//! Every public method is in this file, in five groups: **lifecycle** (`format`, `recover`);
//! **events in** (`handle_upward`, `handle_base`, `handle_store`, `handle_load`,
//! `connection_lost`, `handle_timeout`), each checking the whole state afterwards in debug
//! builds (`invariants.rs`); **work out** (`poll_base`, `poll_store`, `poll_upward`,
//! `poll_timeout`, whose deadlines are tabled in `timers.rs`); **control** (`set_*`,
//! `remove_store`); and **queries**. The work behind each event is in the module of its
//! responsibility: `upward` (writes from above), `reads` (reads from above), `base`
//! (base-volume completions),
//! `stores` (store replies, failed and recovered stores), `stale` (deleting stale copies and
//! their deletion records), `reclaim`, `local` (Sierra §3.6's local copies of off-loaded
//! writes), `degraded` (the superblock and its degraded mark),
//! `recovery`, `timers`; the state they share is in `state.rs`.
//!
//! # What it guarantees
//!
//! - A read returns, for every byte, the last acknowledged write or one issued concurrently.
//!   A write answered with an error may still take effect (its outcome is unknown), but never
//!   after a read issued after that answer returned the data beneath it.
//! - A write is acknowledged upward only once its data is durable: on the base volume (when
//!   asked for durability) or on every store it was sent to that did not fail; the range map is
//!   updated before the acknowledgement.
//! - The three invariants of Everest §3.2.3 hold and are asserted: a version is deleted only once
//!   it is on the base volume or a higher version is on a store; a write overlapping off-loaded
//!   data is off-loaded with a higher version; the highest off-loaded version of a range is
//!   deleted only once every older copy is deleted (or a deletion record for it is durable).
//! - Versions are `generation << 40 | counter`, the generation being bumped and persisted on
//!   every start, so versions never repeat across crashes.

mod api;
mod base;
mod copies;
mod degraded;
mod invariants;
mod local;
mod map;
mod reads;
mod reclaim;
mod recovery;
mod stale;
mod state;
mod stores;
#[cfg(test)]
mod tests;
mod timers;
mod upward;

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, VecDeque};

use cordillera_types::rangemap::RangeMap;
use cordillera_vstore::store::{Extent, Reply, Request, StoreError};
use map::LocMap;

use crate::records::{companion, DeletionRecord, ENTRIES_MAX, SLOT_SHIFT};
use crate::superblock::{Superblock, SuperblockError, STORES_MAX, SUPERBLOCK_BYTES};

pub use crate::superblock::StoreInfo;
pub use api::*;
pub use state::Client;
use state::*;

pub use cordillera_types::Nanos;
/// A store's position in the client's store set.
pub type StoreIdx = usize;
/// A range a store returned, with its bytes.
type Piece = (Extent, Vec<u8>);
/// `(start, end, version)`.
type Span = (u64, u64, u64);

const VERSION_BITS: u32 = cordillera_vstore::store::GENERATION_SHIFT;
/// The client id used for probes of stores that are down (it never owns data).
const PROBE_CLIENT: u64 = u64::MAX;
/// Deletes in flight per store at most.
const DELETES_IN_FLIGHT_MAX: u64 = 256;

fn bit(s: StoreIdx) -> u64 {
    1u64 << s
}

fn indices(mask: u64) -> impl Iterator<Item = StoreIdx> {
    (0..64).filter(move |&i| mask & (1 << i) != 0)
}

impl Client {
    // ---- Lifecycle: a new volume, or a restart on one

    /// A client for a new volume: writes the store set (generation 1) to the base volume.
    pub fn format(config: Config, stores: Vec<StoreInfo>, now: Nanos) -> Client {
        assert!(stores.len() <= STORES_MAX, "at most 64 stores");
        let mut c = Client::empty(config, stores, Phase::Formatting, now);
        c.write_superblock();
        c
    }

    /// A client restarting on an existing volume: reads the store set, then rebuilds its soft
    /// state from every store's metadata (waiting for stores that are recovering themselves).
    pub fn recover(config: Config, now: Nanos) -> Client {
        let mut c = Client::empty(config, Vec::new(), Phase::ReadingSuperblock, now);
        c.read_superblock();
        c.stats.recoveries += 1;
        c
    }

    // ---- Events in: each ends with the state checked (`invariants.rs`)

    /// A request from above: a read or a write of the volume.
    pub fn handle_upward(&mut self, now: Nanos, id: u64, request: Upward) {
        self.upward_step(now, id, request);
        self.check_invariants();
    }

    /// A base-volume request completed.
    pub fn handle_base(&mut self, now: Nanos, done: BaseDone) {
        self.base_step(now, done);
        self.check_invariants();
    }

    /// A store answered request `id`; `load` is the load it piggy-backed (requests in flight
    /// on its volume), if any.
    pub fn handle_store(
        &mut self,
        now: Nanos,
        store: StoreIdx,
        id: u64,
        reply: Reply,
        load: Option<u64>,
    ) {
        self.store_step(now, store, id, reply, load);
        self.check_invariants();
    }

    /// A periodic load broadcast from a store.
    pub fn handle_load(&mut self, store: StoreIdx, load: u64) {
        if let Some(s) = self.stores.get_mut(store) {
            s.reported_load = load;
        }
    }

    /// The load of the volume that shares store `store`'s disk, as the store reported it with
    /// a reply or a broadcast: operations on its disk that are not the store's. A store at
    /// T_store or more of it is not lightly loaded, and reclaim of a quiet base volume asks it
    /// one read_any at a time (Everest §3.2.3).
    pub fn handle_volume_load(&mut self, store: StoreIdx, load: u64) {
        if let Some(s) = self.stores.get_mut(store) {
            s.volume_load = load;
        }
    }

    /// The connection to a store broke (the store restarted, or the network failed): every
    /// request outstanding there may or may not have been carried out, and the store counts as
    /// failed until a probe gets an answer.
    pub fn connection_lost(&mut self, now: Nanos, store: StoreIdx) {
        self.connection_lost_step(now, store);
        self.check_invariants();
    }

    /// The time [`Client::poll_timeout`] named has come.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.timeout_step(now);
        self.check_invariants();
    }

    // ---- Work out: what the driver sends and answers

    pub fn poll_base(&mut self) -> Option<BaseOp> {
        self.base_out.pop_front()
    }

    pub fn poll_store(&mut self) -> Option<(StoreIdx, u64, Request)> {
        self.store_out.pop_front()
    }

    pub fn poll_upward(&mut self) -> Option<(u64, UpReply)> {
        self.upward_out.pop_front()
    }

    /// When [`Client::handle_timeout`] is due next (`timers.rs` lists every deadline).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.next_deadline()
    }

    // ---- Control: the driver's and Sierra's settings

    /// Changes when writes are off-loaded from now on (e.g. "always" for a burst, then "peak"
    /// so that the data is reclaimed). Data already off-loaded stays correct under any policy.
    pub fn set_policy(&mut self, policy: Policy) {
        self.config.policy = policy;
    }

    /// Load on the base volume from others (a store co-hosted on it).
    pub fn set_external_base_load(&mut self, load: u64) {
        self.external_base_load = load;
    }

    /// Under [`Policy::WhileBaseUnavailable`]: whether every replica of the base takes writes
    /// now. While not, every write is off-loaded and nothing is reclaimed.
    pub fn set_base_available(&mut self, now: Nanos, available: bool) {
        self.now = now;
        self.base_available = available;
        self.pump();
    }

    /// Sets how many reclaim jobs may run at once ([`Config::n_reclaim`]) and starts what the
    /// new limit allows. Sierra's chunk server shares one budget among its groups' clients;
    /// lowering the limit below the jobs running lets them finish.
    pub fn set_reclaim_limit(&mut self, n: usize) {
        self.config.n_reclaim = n;
        self.pump_reclaim();
    }

    /// Orders stores by preference before load: `rank` of a store's id, lower first (Sierra's
    /// loggers: on a replica's server, then in a replica's rack, then elsewhere). Copies of a
    /// write still go to stores of distinct [`StoreInfo::server`]s (Sierra: racks).
    pub fn set_store_ranks(&mut self, ranks: impl IntoIterator<Item = (u64, u8)>) {
        self.store_rank = ranks.into_iter().collect();
    }

    /// Removes a store from the store set (decommissioned, or down for too long). Off-loaded
    /// data whose only copies were there is lost (counted in [`Stats::lost_bytes`]).
    pub fn remove_store(&mut self, now: Nanos, store: StoreIdx) {
        self.remove_store_step(now, store);
        self.check_invariants();
    }

    // ---- Queries

    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Why the client cannot start (its store set is missing or damaged), if it cannot.
    pub fn failure(&self) -> Option<ClientError> {
        match &self.phase {
            Phase::Failed(e) => Some(ClientError::NoStoreSet(*e)),
            Phase::Fenced => Some(ClientError::Fenced),
            _ => None,
        }
    }

    /// The store set (removed stores excluded), by index.
    pub fn stores(&self) -> Vec<(StoreIdx, StoreInfo, bool)> {
        self.stores
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.removed)
            .map(|(i, s)| (i, s.info, s.up))
            .collect()
    }

    /// Since when store `store` has been down (`None`: it is up, or not in the set).
    pub fn store_down_since(&self, store: StoreIdx) -> Option<Nanos> {
        self.stores
            .get(store)
            .filter(|s| !s.up)
            .map(|s| s.down_since)
    }

    /// The range map: every off-loaded range and where its latest version is.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64, &Loc)> + '_ {
        self.map.iter()
    }

    /// Per store in the store set (by index, removed ones included): whether it is up, its
    /// requests in flight, its last reported load, and the bytes whose latest version it holds
    /// and that are not yet on the base volume. Walks the range map: for reports, not per I/O.
    pub fn store_figures(&self) -> Vec<StoreFigures> {
        let mut out: Vec<StoreFigures> = self
            .stores
            .iter()
            .map(|s| StoreFigures {
                info: s.info,
                up: s.up,
                removed: s.removed,
                in_flight: s.in_flight,
                reported_load: s.reported_load,
                volume_load: s.volume_load,
                offloaded_bytes: 0,
                stale_bytes: s.stale.iter().map(|(lo, hi, _)| hi - lo).sum(),
                unsent_delete_bytes: s
                    .stale
                    .iter()
                    .filter(|(_, _, v)| !v.sent)
                    .map(|(lo, hi, _)| hi - lo)
                    .sum(),
            })
            .collect();
        for (start, end, loc) in self.map.iter() {
            for (i, f) in out.iter_mut().enumerate() {
                if loc.stores & (1 << i) == 0 {
                    continue;
                }
                if loc.on_base {
                    // Reclaimed: the copy is deleted once no older one remains elsewhere.
                    f.stale_bytes += end - start;
                    f.unsent_delete_bytes += end - start;
                } else {
                    f.offloaded_bytes += end - start;
                }
            }
        }
        out
    }

    /// Bytes off-loaded and not yet on the base volume whose latest version has fewer than N
    /// copies on stores that are up: at risk until reclaimed (they are reclaimed first). Walks
    /// the range map: for reports, not per I/O.
    pub fn at_risk_bytes(&self) -> u64 {
        let up = self.up_mask();
        self.map
            .iter()
            .filter(|(_, _, l)| {
                !l.on_base && ((l.stores & up).count_ones() as usize) < self.config.n_way
            })
            .map(|(start, end, _)| end - start)
            .sum()
    }

    /// Since when every store refuses the writes that must be off-loaded as full (`None`
    /// when they are not full): the runtime reports it (WARN, metric).
    pub fn stores_full_since(&self) -> Option<Nanos> {
        self.stores_full_since
    }

    /// Requests in flight on the base volume (ours plus what the driver reports).
    pub fn base_load(&self) -> u64 {
        self.base_in_flight + self.external_base_load
    }

    /// Nothing off-loaded, nothing owed to any store, no deletion record left.
    pub fn is_quiescent(&self) -> bool {
        self.map.is_empty()
            && self.stores.iter().all(|s| s.stale.is_empty())
            && self.records.is_empty()
            && self
                .stores
                .iter()
                .all(|s| s.removed || s.old_records.is_none())
            && self.settling.is_empty()
            && self.reclaim_jobs == 0
            && !self.degraded
            && self.superblock_in_flight.is_none()
    }

    pub fn base_available(&self) -> bool {
        self.base_available
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
        if self.vulnerable_jobs > 0 || !self.reclaims_others() {
            // Other data waits until the vulnerable data is on the base volume.
            return None;
        }
        let urgent = self.urgent_reclaim();
        (0..self.stores.len())
            .any(|s| self.may_ask_for_reclaim(s, urgent))
            .then_some(false)
    }

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

    /// While recovering (fetching every store's ranges): who answered and who is missing.
    pub fn recovery_wait(&self) -> Option<RecoveryWait> {
        let Phase::Fetching(f) = &self.phase else {
            return None;
        };
        let live: Vec<StoreIdx> = (0..self.stores.len())
            .filter(|&s| !self.stores[s].removed)
            .collect();
        let missing: Vec<StoreIdx> = live
            .iter()
            .copied()
            .filter(|&s| f.metadata[s].is_none() || f.records[s].is_none())
            .collect();
        let id = |s: &StoreIdx| self.stores[*s].info.id;
        Some(RecoveryWait {
            answered: live.len() - missing.len(),
            stores: live.len(),
            needed: if f.all_needed {
                live.len()
            } else {
                live.len().saturating_sub(self.config.n_way - 1).max(1)
            },
            failed: missing.iter().filter(|&&s| f.failed[s]).map(id).collect(),
            silent: missing.iter().filter(|&&s| !f.failed[s]).map(id).collect(),
        })
    }

    /// A one-line account of the client's state, for diagnostics.
    pub fn describe(&self) -> String {
        let phase = match &self.phase {
            Phase::Formatting => "formatting",
            Phase::ReadingSuperblock => "reading the store set",
            Phase::Fetching(_) => "fetching metadata",
            Phase::Marking => "marking the superblock degraded",
            Phase::Ready => "ready",
            Phase::Failed(_) => "failed",
            Phase::Fenced => "fenced",
        };
        let stores: Vec<String> = self
            .stores
            .iter()
            .enumerate()
            .map(|(i, s)| {
                // The first stale copy whose delete is held back, and why.
                let held = s
                    .stale
                    .iter()
                    .find(|(_, _, v)| !v.sent && v.slot.is_none())
                    .map(|(lo, hi, v)| {
                        let why = self.delete_refusal(i, lo, hi, v.version);
                        format!(
                            ", first unsent [{lo}, {hi}) ≤v{:x}: {}",
                            v.version,
                            why.unwrap_or("allowed")
                        )
                    })
                    .unwrap_or_default();
                format!(
                    "{}{}(load {}, in flight {}, stale {}{held})",
                    s.info.id,
                    if s.removed {
                        "x"
                    } else if s.up {
                        ""
                    } else {
                        "↓"
                    },
                    s.reported_load,
                    s.in_flight,
                    s.stale.len()
                )
            })
            .collect();
        // The oldest write in flight: where its copies are.
        let first_write = self
            .writes
            .values()
            .min_by_key(|op| op.arrived)
            .map(|op| {
                format!(
                    ", oldest [{}, +{}) v{:x} waiting {} succeeded {:b} tried {:b} answered {}",
                    op.start,
                    op.data.len(),
                    op.version,
                    op.waiting,
                    op.succeeded,
                    op.tried,
                    op.answered
                )
            })
            .unwrap_or_default();
        format!(
            "{phase}{}; ranges {}; writes {} (parked {}{first_write}); reads {} (parked {}, behind failed writes {}); queued {}; base in flight {}; store requests {}; reclaim jobs {}; settling {}; records {}; vulnerable {}; stores {}",
            match (self.degraded, self.degraded_durable) {
                (false, false) => "",
                (true, true) => " (degraded)",
                (true, false) => " (degraded, not durable yet)",
                (false, true) => " (degraded, clearing)",
            },
            self.map.len(),
            self.writes.len(),
            self.parked_writes.len(),
            self.reads.len(),
            self.parked_reads.len(),
            self.reads_behind_failed_writes.len(),
            self.queued_upward.len(),
            self.base_in_flight,
            self.outstanding.len(),
            self.reclaim_jobs,
            self.settling.len(),
            self.records.len(),
            self.vulnerable.len(),
            stores.join(" ")
        )
    }
}

impl Client {
    /// The stores that are up, as a mask of store indices.
    fn up_mask(&self) -> u64 {
        self.stores
            .iter()
            .enumerate()
            .filter(|(_, s)| s.up)
            .fold(0, |m, (i, _)| m | bit(i))
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn next_version(&mut self) -> u64 {
        let v = (self.generation << VERSION_BITS) | self.next_counter;
        self.next_counter += 1;
        assert!(
            self.next_counter < 1 << VERSION_BITS,
            "version counter exhausted"
        );
        v
    }

    /// A request left the outstanding set.
    fn settle_outstanding(&mut self, out: &Outstanding) {
        let st = &mut self.stores[out.store];
        st.in_flight -= 1;
        match out.pending {
            Pending::Delete { .. } => st.deletes_in_flight -= 1,
            Pending::ReclaimAny { .. } => st.any_in_flight -= 1,
            _ => {}
        }
    }

    /// When a busy store that stays silent is deemed failed.
    fn silence_deadline(&self, s: StoreIdx) -> Option<Nanos> {
        let st = &self.stores[s];
        let timeout = self.config.request_timeout_ns?;
        (st.in_flight > 0 && !st.removed).then(|| st.last_heard.max(st.busy_since) + timeout)
    }

    fn store_load(&self, s: StoreIdx) -> u64 {
        let st = &self.stores[s];
        st.reported_load.max(st.in_flight)
    }

    fn send(&mut self, store: StoreIdx, request: Request, pending: Pending) {
        let id = self.id();
        let st = &mut self.stores[store];
        if st.in_flight == 0 {
            st.busy_since = self.now;
        }
        st.in_flight += 1;
        match pending {
            Pending::Delete { .. } => st.deletes_in_flight += 1,
            Pending::ReclaimAny { .. } => st.any_in_flight += 1,
            _ => {}
        }
        self.outstanding.insert(id, Outstanding { store, pending });
        self.store_out.push_back((store, id, request));
    }

    /// Work every event may unblock.
    fn pump(&mut self) {
        if !self.is_ready() {
            return;
        }
        if self.stores.iter().any(|s| s.stale_dirty) {
            self.settle_dirty = true;
        }
        self.pump_stale();
        self.pump_old_records();
        if std::mem::take(&mut self.settle_dirty) {
            self.pump_settle();
        } else if cfg!(debug_assertions) {
            // Checks that `settle_dirty` follows every change a settling entry waits for: a
            // pass now must change nothing.
            let state = |c: &Client| -> Vec<(u64, bool)> {
                c.settling.iter().map(|s| (s.version, s.deleting)).collect()
            };
            let before = state(self);
            self.pump_settle();
            assert_eq!(
                before,
                state(self),
                "a settling reclaim progressed without settle_dirty: {}",
                self.describe()
            );
            self.settle_dirty = false;
        }
        self.pump_stale();
        self.pump_seals();
        self.pump_reads_behind_failed_writes();
        self.pump_reclaim();
        self.pump_degraded();
    }
}
