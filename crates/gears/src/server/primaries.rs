//! The groups a chunk server is primary of ([`Primaries`]), with what the server asks of each
//! after every event kept per group ([`Facts`]: its earliest deadline, its reclaim wants), and
//! the newest epoch seen per group ([`Epochs`]), which only rises.
//!
//! A group's facts are a function of its [`Primary`] alone (its log client's state included),
//! so they are recomputed only for groups borrowed mutably since ([`Primaries::get_mut`],
//! [`Primaries::insert`]) when [`Primaries::settle`] runs: after each event, and before the
//! reclaim budget is shared out. An event changes one group or a few; walking every group's
//! log client after each one (`poll_timeout`, `balance_reclaim`) was a third of a Sierra lab
//! run on a server with hundreds of groups. Debug builds compare every group's facts with a
//! fresh computation every [`VERIFY_EVERY`] settles, and the invariant checks visit only
//! the groups changed since the last check (what holds of an unchanged group still holds:
//! its own fields did not move, and the epochs it is checked against only rise).

use rustc_hash::FxHashMap;

use super::*;

/// How often (in settles) debug builds recompute every group's facts to check the cache.
const VERIFY_EVERY: u64 = 64;

/// What the server asks of a group after an event, as of the group's last change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Facts {
    /// The earliest of the group's deadlines (its log client's, base writes waiting for
    /// secondaries, superblock writes, rebuild and orphan pieces).
    pub deadline: Option<Nanos>,
    pub reclaim_jobs: usize,
    pub reclaim_limit: usize,
    pub reclaim_wanted: Option<bool>,
    pub reclaiming_vulnerable: bool,
}

impl Facts {
    fn of(d: Deadlines, p: &Primary) -> Facts {
        Facts {
            deadline: d.of_group(p),
            reclaim_jobs: p.log.reclaim_jobs(),
            reclaim_limit: p.log.reclaim_limit(),
            reclaim_wanted: p.log.reclaim_wanted(),
            reclaiming_vulnerable: p.log.reclaiming_vulnerable(),
        }
    }
}

pub(super) struct Primaries {
    /// By group, and the groups in order (every walk is in group order; a lookup is a hash:
    /// `pump` alone looks its group up once a step).
    map: FxHashMap<GroupId, Slot>,
    order: BTreeSet<GroupId>,
    deadlines: Deadlines,
    /// Groups borrowed mutably since their facts were computed (each once: `Slot::dirty`),
    /// and groups removed since.
    dirty: Vec<GroupId>,
    /// (deadline, group) for every group with one: the first is the server's earliest.
    by_deadline: BTreeSet<(Nanos, GroupId)>,
    /// Groups changed since the last invariant check (debug builds; each once:
    /// `Slot::unchecked`).
    unchecked: Vec<GroupId>,
    settles: u64,
}

struct Slot {
    primary: Primary,
    /// As of the last settle (none before the first).
    facts: Option<Facts>,
    /// In `dirty`, in `unchecked`.
    dirty: bool,
    unchecked: bool,
}

impl Primaries {
    pub(super) fn new(deadlines: Deadlines) -> Primaries {
        Primaries {
            map: FxHashMap::default(),
            order: BTreeSet::new(),
            deadlines,
            dirty: Vec::new(),
            by_deadline: BTreeSet::new(),
            unchecked: Vec::new(),
            settles: 0,
        }
    }

    pub(super) fn get(&self, g: &GroupId) -> Option<&Primary> {
        self.map.get(g).map(|s| &s.primary)
    }

    /// The group's primary, to change: its facts are computed again at the next settle.
    pub(super) fn get_mut(&mut self, g: &GroupId) -> Option<&mut Primary> {
        let slot = self.map.get_mut(g)?;
        if !slot.dirty {
            slot.dirty = true;
            self.dirty.push(*g);
        }
        if cfg!(debug_assertions) && !slot.unchecked {
            slot.unchecked = true;
            self.unchecked.push(*g);
        }
        Some(&mut slot.primary)
    }

    pub(super) fn insert(&mut self, g: GroupId, primary: Primary) {
        let slot = Slot {
            primary,
            facts: None,
            dirty: true,
            unchecked: cfg!(debug_assertions),
        };
        self.order.insert(g);
        if let Some(old) = self.map.insert(g, slot) {
            self.forget(g, &old);
            // Already listed for a settle and a check if it was marked.
            if old.dirty {
                self.dirty.retain(|&x| x != g);
            }
            if old.unchecked {
                self.unchecked.retain(|&x| x != g);
            }
        }
        self.dirty.push(g);
        if cfg!(debug_assertions) {
            self.unchecked.push(g);
        }
    }

    pub(super) fn remove(&mut self, g: &GroupId) -> Option<Primary> {
        let slot = self.map.remove(g)?;
        self.order.remove(g);
        self.forget(*g, &slot);
        // (A group removed is left out of settles and checks: both skip it.)
        Some(slot.primary)
    }

    /// Takes a slot's last deadline out of the order.
    fn forget(&mut self, g: GroupId, slot: &Slot) {
        if let Some(t) = slot.facts.and_then(|f| f.deadline) {
            self.by_deadline.remove(&(t, g));
        }
    }

    pub(super) fn contains_key(&self, g: &GroupId) -> bool {
        self.map.contains_key(g)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &GroupId> {
        self.order.iter()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Primary> {
        self.order.iter().map(|g| &self.map[g].primary)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&GroupId, &Primary)> {
        self.order.iter().map(|g| (g, &self.map[g].primary))
    }

    /// Computes the facts of every group changed since the last settle.
    pub(super) fn settle(&mut self) {
        for g in std::mem::take(&mut self.dirty) {
            let Some(slot) = self.map.get_mut(&g) else {
                continue;
            };
            if let Some(t) = slot.facts.and_then(|f| f.deadline) {
                self.by_deadline.remove(&(t, g));
            }
            let facts = Facts::of(self.deadlines, &slot.primary);
            if let Some(t) = facts.deadline {
                self.by_deadline.insert((t, g));
            }
            slot.facts = Some(facts);
            slot.dirty = false;
        }
        self.settles += 1;
        if cfg!(debug_assertions) && self.settles.is_multiple_of(VERIFY_EVERY) {
            self.verify();
        }
    }

    /// Every group's facts against a fresh computation (debug builds, every few settles).
    fn verify(&self) {
        assert_eq!(
            self.order.len(),
            self.map.len(),
            "the order lists other groups"
        );
        let mut deadlines = BTreeSet::new();
        for (&g, slot) in &self.map {
            let facts = Facts::of(self.deadlines, &slot.primary);
            assert_eq!(
                slot.facts,
                Some(facts),
                "{g:?} changed without being borrowed mutably"
            );
            deadlines.extend(facts.deadline.map(|t| (t, g)));
        }
        assert_eq!(
            deadlines, self.by_deadline,
            "the deadlines' order lists others"
        );
    }

    /// A group's facts (settled).
    pub(super) fn facts(&self, g: &GroupId) -> Facts {
        debug_assert!(self.dirty.is_empty(), "facts read before a settle");
        self.map[g].facts.expect("settled")
    }

    /// The earliest deadline of any group (settled).
    pub(super) fn earliest(&self) -> Option<Nanos> {
        debug_assert!(
            self.dirty.is_empty(),
            "the deadline read before a settle: {:?} changed",
            self.dirty
        );
        self.by_deadline.first().map(|&(t, _)| t)
    }

    /// The groups changed since the last call (debug builds: every call, for the invariant
    /// checks); groups since removed are left out.
    pub(super) fn take_unchecked(&mut self) -> Vec<GroupId> {
        let mut groups = std::mem::take(&mut self.unchecked);
        groups.retain(|g| match self.map.get_mut(g) {
            Some(slot) => {
                slot.unchecked = false;
                true
            }
            None => false,
        });
        groups
    }
}

impl std::ops::Index<&GroupId> for Primaries {
    type Output = Primary;

    fn index(&self, g: &GroupId) -> &Primary {
        &self.map[g].primary
    }
}

/// The newest epoch seen per group: it only rises (replication from an older epoch is refused
/// against it), which [`Epochs::raise`] checks at every change.
#[derive(Default)]
pub(super) struct Epochs(BTreeMap<GroupId, Epoch>);

impl Epochs {
    pub(super) fn get(&self, g: &GroupId) -> Option<Epoch> {
        self.0.get(g).copied()
    }

    /// The newest epoch seen for the group, `epoch` recorded first if it is the first seen.
    pub(super) fn seen(&mut self, g: GroupId, epoch: Epoch) -> Epoch {
        *self.0.entry(g).or_insert(epoch)
    }

    pub(super) fn raise(&mut self, g: GroupId, epoch: Epoch) {
        let seen = self.0.entry(g).or_insert(epoch);
        assert!(
            epoch >= *seen,
            "the newest epoch seen for {g:?} would go from {seen} to {epoch}"
        );
        *seen = epoch;
    }
}
