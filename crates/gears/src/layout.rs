//! Power-aware layout (§3.3, Table 1, Figures 4–5): which servers hold the replicas of each
//! placement unit (a chunk group in the system, a chunk in Table 1's analysis), and what a layout
//! allows — how many servers can be off in gear g while every unit keeps g replicas on, and how
//! many servers a failed server's contents can be rebuilt on in parallel.
//!
//! | layout | rule | off in gear g (Table 1) | rebuild parallelism (Table 1) |
//! |---|---|---|---|
//! | naive random | r distinct servers at random | r − g | N |
//! | naive grouping | one of N/r fixed replica groups | N(r − g)/r | 1 |
//! | power-aware grouping | one server of each of r gear groups | N(r − g)/r | N/r |
//!
//! With racks ([`RackPolicy::Aligned`] or [`RackPolicy::Rotated`]) a unit's replicas are on r
//! distinct racks. Power-aware grouping then has two forms (Figure 5): rack-aligned, where a gear
//! group is a set of whole racks, and rotated, where every rack holds servers of every gear group.
//!
//! The count of servers that can be off is measured, not assumed: [`Layout::off_plan`] builds a
//! set (whole gear groups, members of each replica group, or a greedy search for naive random)
//! and [`Layout::keeps_gear`] checks it; [`Layout::max_off_exact`] finds the true maximum for
//! clusters of up to 64 servers.

use std::collections::BTreeSet;

use serde::Serialize;
use thiserror::Error;

use cordillera_types::rng::SplitMix64;

use crate::model::{ServerId, Topology, REPLICAS_MAX};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayoutKind {
    NaiveRandom,
    NaiveGrouping,
    PowerAware,
}

impl LayoutKind {
    pub const ALL: [LayoutKind; 3] = [
        LayoutKind::NaiveRandom,
        LayoutKind::NaiveGrouping,
        LayoutKind::PowerAware,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::NaiveRandom => "naive random",
            LayoutKind::NaiveGrouping => "naive grouping",
            LayoutKind::PowerAware => "power-aware grouping",
        }
    }
}

/// How replicas relate to racks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RackPolicy {
    /// Racks play no part.
    Ignored,
    /// Replicas on distinct racks; gear groups (and replica groups) are whole racks where the
    /// layout has them: all servers of a rack share a power state (Figure 5(a), the default).
    Aligned,
    /// Replicas on distinct racks; every rack holds servers of every gear group, so powered
    /// servers spread over all racks (Figure 5(b)).
    Rotated,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LayoutSpec {
    pub kind: LayoutKind,
    pub racks: RackPolicy,
    /// r.
    pub replicas: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum LayoutError {
    #[error("{replicas} replicas: a layout needs between 1 and {REPLICAS_MAX}")]
    Replicas { replicas: usize },
    #[error("{servers} servers cannot hold {replicas} replicas of a chunk on distinct servers")]
    TooFewServers { servers: usize, replicas: usize },
    #[error("{servers} servers do not divide into {replicas} equal groups")]
    Indivisible { servers: usize, replicas: usize },
    #[error("replicas on distinct racks need at least {replicas} racks; the cluster has {racks}")]
    TooFewRacks { racks: usize, replicas: usize },
    #[error("rack-aligned gear groups need a number of racks divisible by {replicas}, and racks of equal size; the cluster has {racks} racks")]
    RacksUnaligned { racks: usize, replicas: usize },
    #[error("rotated gear groups of equal size need every rack's server count to make each gear group the same size")]
    RacksUnbalanced,
    #[error("no server of gear group {group} is in a rack the unit does not use yet")]
    NoPlacement { group: usize },
}

/// The replicas of every placement unit under one layout.
#[derive(Clone, Debug)]
pub struct Layout {
    pub spec: LayoutSpec,
    pub topology: Topology,
    /// The group of each server: its gear group (power-aware) or its replica group (naive
    /// grouping); empty for naive random.
    group_of: Vec<u32>,
    /// `replicas` servers per unit, unit after unit.
    units: Vec<ServerId>,
}

/// What a layout allows (Table 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayoutReport {
    pub kind: LayoutKind,
    pub racks: RackPolicy,
    pub servers: usize,
    pub units: usize,
    /// For gear g = 0..=r: servers in the layout's own off-plan, checked to keep g replicas of
    /// every unit on.
    pub off_in_gear: Vec<usize>,
    /// For gear g: the true maximum, where the exact search finished (N ≤ 64).
    pub max_off_in_gear: Vec<Option<usize>>,
    /// The fewest servers any failed server's contents can be rebuilt on in parallel.
    pub rebuild_parallelism: usize,
}

/// Nodes the exact search may visit before giving up.
pub const EXACT_SEARCH_NODES_MAX: u64 = 2_000_000;

impl Layout {
    /// Places `units` units on `topology` by `spec`, drawing from `rng`.
    pub fn generate(
        spec: LayoutSpec,
        topology: &Topology,
        units: usize,
        rng: &mut SplitMix64,
    ) -> Result<Layout, LayoutError> {
        let r = spec.replicas;
        let n = topology.servers();
        if r == 0 || r > REPLICAS_MAX {
            return Err(LayoutError::Replicas { replicas: r });
        }
        if n < r {
            return Err(LayoutError::TooFewServers {
                servers: n,
                replicas: r,
            });
        }
        let racks = topology.rack_count();
        let cross_rack = spec.racks != RackPolicy::Ignored;
        if cross_rack && racks < r {
            return Err(LayoutError::TooFewRacks { racks, replicas: r });
        }
        let group_of = match spec.kind {
            LayoutKind::NaiveRandom => Vec::new(),
            LayoutKind::NaiveGrouping => replica_groups(topology, spec)?,
            LayoutKind::PowerAware => gear_groups(topology, spec)?,
        };
        let mut layout = Layout {
            spec,
            topology: topology.clone(),
            group_of,
            units: Vec::with_capacity(units * r),
        };
        let members = layout.members_by_group();
        let mut unit = Vec::with_capacity(r);
        for _ in 0..units {
            unit.clear();
            match spec.kind {
                LayoutKind::NaiveRandom => {
                    while unit.len() < r {
                        let s = rng.below(n as u64) as ServerId;
                        let rack_taken = cross_rack
                            && unit
                                .iter()
                                .any(|&u| topology.rack_of(u) == topology.rack_of(s));
                        if !unit.contains(&s) && !rack_taken {
                            unit.push(s);
                        }
                    }
                }
                LayoutKind::NaiveGrouping => {
                    let group = rng.below(members.len() as u64) as usize;
                    unit.extend_from_slice(&members[group]);
                }
                LayoutKind::PowerAware => {
                    // One replica from each gear group, in a random order of groups so that no
                    // group is always the one left with the fewest racks to choose from.
                    let mut order: Vec<usize> = (0..r).collect();
                    shuffle(&mut order, rng);
                    let mut chosen = vec![0; r];
                    for &group in &order {
                        let candidates: Vec<ServerId> = members[group]
                            .iter()
                            .copied()
                            .filter(|&s| !cross_rack || unit_rack_free(topology, &unit, s))
                            .collect();
                        if candidates.is_empty() {
                            return Err(LayoutError::NoPlacement { group });
                        }
                        let s = candidates[rng.below(candidates.len() as u64) as usize];
                        chosen[group] = s;
                        unit.push(s);
                    }
                    // Stored by gear group, so replica i of a unit is in gear group i.
                    unit.clear();
                    unit.extend_from_slice(&chosen);
                }
            }
            debug_assert_eq!(unit.len(), r);
            layout.units.extend_from_slice(&unit);
        }
        Ok(layout)
    }

    pub fn replicas(&self) -> usize {
        self.spec.replicas
    }

    pub fn unit_count(&self) -> usize {
        self.units.len() / self.spec.replicas
    }

    /// The servers holding unit `i`'s replicas (for power-aware grouping, replica j is in gear
    /// group j).
    pub fn unit(&self, i: usize) -> &[ServerId] {
        let r = self.spec.replicas;
        &self.units[i * r..(i + 1) * r]
    }

    /// The gear group of `server` (power-aware grouping only).
    pub fn gear_group(&self, server: ServerId) -> Option<usize> {
        (self.spec.kind == LayoutKind::PowerAware).then(|| self.group_of[server as usize] as usize)
    }

    /// The servers of each group (gear groups or replica groups), in server order.
    pub fn members_by_group(&self) -> Vec<Vec<ServerId>> {
        let groups = self
            .group_of
            .iter()
            .map(|&g| g as usize + 1)
            .max()
            .unwrap_or(0);
        let mut members = vec![Vec::new(); groups];
        for (s, &g) in self.group_of.iter().enumerate() {
            members[g as usize].push(s as ServerId);
        }
        members
    }

    /// Whether every unit keeps at least `gear` replicas on servers not in `off`.
    pub fn keeps_gear(&self, off: &[bool], gear: usize) -> bool {
        (0..self.unit_count())
            .all(|i| self.unit(i).iter().filter(|&&s| !off[s as usize]).count() >= gear)
    }

    /// The layout's own choice of servers to power off in gear `gear` (0 ≤ gear ≤ r):
    /// power-aware grouping turns off the first r − g gear groups of `rotation` (a permutation of
    /// the gear groups; the scheduler rotates it across days); naive grouping turns off r − g
    /// members of every replica group; naive random adds servers greedily (fewest units first)
    /// while every unit keeps `gear` replicas on.
    pub fn off_plan(&self, gear: usize, rotation: &[usize]) -> Vec<ServerId> {
        let r = self.spec.replicas;
        assert!(gear <= r, "gear {gear} of {r}");
        let n = self.topology.servers();
        match self.spec.kind {
            LayoutKind::PowerAware => {
                assert_eq!(rotation.len(), r, "a rotation orders all gear groups");
                let off_groups = &rotation[..r - gear];
                (0..n as ServerId)
                    .filter(|&s| off_groups.contains(&(self.group_of[s as usize] as usize)))
                    .collect()
            }
            LayoutKind::NaiveGrouping => {
                let shift = rotation.first().copied().unwrap_or(0);
                let mut off: Vec<ServerId> = self
                    .members_by_group()
                    .iter()
                    .flat_map(|members| {
                        (0..r - gear).map(move |k| members[(k + shift) % members.len()])
                    })
                    .collect();
                off.sort_unstable();
                off
            }
            LayoutKind::NaiveRandom => {
                let mut held = vec![0usize; n];
                for &s in &self.units {
                    held[s as usize] += 1;
                }
                let mut order: Vec<ServerId> = (0..n as ServerId).collect();
                order.sort_by_key(|&s| (held[s as usize], s));
                // Replicas off per unit; a server can join while none of its units would drop
                // below `gear` replicas on.
                let mut off_count = vec![0usize; self.unit_count()];
                let mut units_of = vec![Vec::new(); n];
                for i in 0..self.unit_count() {
                    for &s in self.unit(i) {
                        units_of[s as usize].push(i);
                    }
                }
                let mut off = Vec::new();
                for s in order {
                    if units_of[s as usize]
                        .iter()
                        .all(|&i| off_count[i] < r - gear)
                    {
                        for &i in &units_of[s as usize] {
                            off_count[i] += 1;
                        }
                        off.push(s);
                    }
                }
                off.sort_unstable();
                off
            }
        }
    }

    /// The most servers that can be off in gear `gear` with every unit keeping `gear` replicas
    /// on, found exactly (as N minus a smallest set of servers that holds, for every unit, one
    /// of each r − g + 1 of its replicas); `None` for more than 64 servers or when the search
    /// visits more than [`EXACT_SEARCH_NODES_MAX`] nodes.
    pub fn max_off_exact(&self, gear: usize) -> Option<usize> {
        let r = self.spec.replicas;
        let n = self.topology.servers();
        if n > 64 {
            return None;
        }
        if gear == 0 {
            return Some(n);
        }
        // Every (r − g + 1)-subset of a unit must have a server on.
        let k = r - gear + 1;
        let mut edges = BTreeSet::new();
        for i in 0..self.unit_count() {
            let unit = self.unit(i);
            for subset in subsets(r, k) {
                let mask = subset.iter().fold(0u64, |m, &j| m | 1u64 << unit[j]);
                edges.insert(mask);
            }
        }
        let edges: Vec<u64> = edges.into_iter().collect();
        let plan = self.off_plan(gear, &(0..r).collect::<Vec<_>>());
        let mut plan_on = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        for s in plan {
            plan_on &= !(1u64 << s);
        }
        // Small sets of servers on (grouped layouts in low gears) are found fast from the on
        // side, small sets off (naive random) from the off side; each search is exact when it
        // finishes.
        let mut on_side = HittingSet {
            edges: &edges,
            best: plan_on.count_ones() as usize,
            nodes: 0,
        };
        if on_side.run(0, 0).is_some() {
            return Some(n - on_side.best);
        }
        let mut edges_of = vec![Vec::new(); n];
        for &edge in &edges {
            let mut rest = edge;
            while rest != 0 {
                edges_of[rest.trailing_zeros() as usize].push(edge);
                rest &= rest - 1;
            }
        }
        let mut off_side = IndependentSet {
            edges_of: &edges_of,
            best: n - plan_on.count_ones() as usize,
            nodes: 0,
        };
        let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        off_side.run(0, all)?;
        Some(off_side.best)
    }

    /// Servers a failed `server`'s replicas can be rebuilt on under the layout's rule, over all
    /// its units: for naive random, any server outside the unit (on a rack the unit's other
    /// replicas do not use, with racks); for power-aware grouping, the other servers of its gear
    /// group (on such a rack); for naive grouping, the one server that replaces it in its
    /// replica group (the server outside the group holding the fewest units).
    pub fn rebuild_targets(&self, server: ServerId) -> BTreeSet<ServerId> {
        let n = self.topology.servers() as ServerId;
        let cross_rack = self.spec.racks != RackPolicy::Ignored;
        let mut targets = BTreeSet::new();
        // No rule can offer more than every other server (naive random) or every other server
        // of the gear group (power-aware): stop looking once that many are found.
        let possible = match self.spec.kind {
            LayoutKind::PowerAware => {
                let group = self.group_of[server as usize];
                self.group_of.iter().filter(|&&g| g == group).count() - 1
            }
            _ => n as usize - 1,
        };
        if self.spec.kind == LayoutKind::NaiveGrouping {
            let group = self.group_of[server as usize];
            let mut held = vec![0usize; n as usize];
            for &s in &self.units {
                held[s as usize] += 1;
            }
            if let Some(replacement) = (0..n)
                .filter(|&s| self.group_of[s as usize] != group)
                .min_by_key(|&s| (held[s as usize], s))
            {
                targets.insert(replacement);
            }
            return targets;
        }
        for i in 0..self.unit_count() {
            let unit = self.unit(i);
            if !unit.contains(&server) {
                continue;
            }
            let others: Vec<ServerId> = unit.iter().copied().filter(|&s| s != server).collect();
            for t in 0..n {
                let eligible = !unit.contains(&t)
                    && (!cross_rack || unit_rack_free(&self.topology, &others, t))
                    && match self.spec.kind {
                        LayoutKind::PowerAware => {
                            self.group_of[t as usize] == self.group_of[server as usize]
                        }
                        _ => true,
                    };
                if eligible {
                    targets.insert(t);
                }
            }
            if targets.len() == possible {
                break;
            }
        }
        targets
    }

    /// Table 1 for this layout: the off-plan for every gear (checked), the exact maximum where
    /// it can be found, and the rebuild parallelism (the fewest over all failed servers).
    pub fn report(&self) -> LayoutReport {
        let r = self.spec.replicas;
        let n = self.topology.servers();
        let rotation: Vec<usize> = (0..r).collect();
        let off_in_gear = (0..=r)
            .map(|gear| {
                let plan = self.off_plan(gear, &rotation);
                let mut off = vec![false; n];
                for &s in &plan {
                    off[s as usize] = true;
                }
                assert!(
                    self.keeps_gear(&off, gear),
                    "the off-plan keeps gear {gear}"
                );
                plan.len()
            })
            .collect();
        let max_off_in_gear = (0..=r).map(|gear| self.max_off_exact(gear)).collect();
        let rebuild_parallelism = (0..n as ServerId)
            .map(|s| self.rebuild_targets(s).len())
            .min()
            .unwrap_or(0);
        LayoutReport {
            kind: self.spec.kind,
            racks: self.spec.racks,
            servers: n,
            units: self.unit_count(),
            off_in_gear,
            max_off_in_gear,
            rebuild_parallelism,
        }
    }
}

/// Whether `candidate`'s rack holds none of `unit`'s servers.
fn unit_rack_free(topology: &Topology, unit: &[ServerId], candidate: ServerId) -> bool {
    unit.iter()
        .all(|&u| topology.rack_of(u) != topology.rack_of(candidate))
}

/// Gear group of each server. Without racks: N/r consecutive servers per group. Rack-aligned:
/// rack k is in gear group k mod r (racks of equal size, a multiple of r of them). Rotated: the
/// server at position p of rack k is in gear group (p + k) mod r.
fn gear_groups(topology: &Topology, spec: LayoutSpec) -> Result<Vec<u32>, LayoutError> {
    let r = spec.replicas;
    let n = topology.servers();
    let racks = topology.rack_count();
    if !n.is_multiple_of(r) {
        return Err(LayoutError::Indivisible {
            servers: n,
            replicas: r,
        });
    }
    let groups: Vec<u32> = match spec.racks {
        RackPolicy::Ignored => (0..n).map(|s| (s * r / n) as u32).collect(),
        RackPolicy::Aligned => {
            let sizes: BTreeSet<usize> = (0..racks as u32)
                .map(|k| topology.servers_in(k).count())
                .collect();
            if !racks.is_multiple_of(r) || sizes.len() != 1 {
                return Err(LayoutError::RacksUnaligned { racks, replicas: r });
            }
            topology
                .racks_of_servers
                .iter()
                .map(|&k| k % r as u32)
                .collect()
        }
        RackPolicy::Rotated => {
            let mut groups = vec![0; n];
            for k in 0..racks as u32 {
                for (p, s) in topology.servers_in(k).enumerate() {
                    groups[s as usize] = ((p + k as usize) % r) as u32;
                }
            }
            groups
        }
    };
    let mut sizes = vec![0usize; r];
    for &g in &groups {
        sizes[g as usize] += 1;
    }
    if sizes.iter().any(|&size| size != n / r) {
        return Err(LayoutError::RacksUnbalanced);
    }
    Ok(groups)
}

/// Replica group of each server: N/r groups of r. With racks, group j takes the j-th server of
/// r racks taken in turn, so its members are on distinct racks.
fn replica_groups(topology: &Topology, spec: LayoutSpec) -> Result<Vec<u32>, LayoutError> {
    let r = spec.replicas;
    let n = topology.servers();
    if !n.is_multiple_of(r) {
        return Err(LayoutError::Indivisible {
            servers: n,
            replicas: r,
        });
    }
    if spec.racks == RackPolicy::Ignored {
        return Ok((0..n).map(|s| (s / r) as u32).collect());
    }
    // Deal servers rack by rack into a sequence where consecutive servers alternate racks, then
    // cut it into groups of r: with at least r racks of equal size, each group spans r racks.
    let racks = topology.rack_count();
    let per_rack: Vec<Vec<ServerId>> = (0..racks as u32)
        .map(|k| topology.servers_in(k).collect())
        .collect();
    let depth = per_rack.iter().map(Vec::len).max().unwrap_or(0);
    let mut sequence = Vec::with_capacity(n);
    for p in 0..depth {
        for rack in &per_rack {
            if let Some(&s) = rack.get(p) {
                sequence.push(s);
            }
        }
    }
    let mut groups = vec![0; n];
    for (i, chunk) in sequence.chunks(r).enumerate() {
        let racks_used: BTreeSet<_> = chunk.iter().map(|&s| topology.rack_of(s)).collect();
        if racks_used.len() != r {
            return Err(LayoutError::RacksUnaligned { racks, replicas: r });
        }
        for &s in chunk {
            groups[s as usize] = i as u32;
        }
    }
    Ok(groups)
}

/// The k-subsets of `0..r`, as index lists.
fn subsets(r: usize, k: usize) -> Vec<Vec<usize>> {
    (0u32..1 << r)
        .filter(|m| m.count_ones() as usize == k)
        .map(|m| (0..r).filter(|&i| m & 1 << i != 0).collect())
        .collect()
}

fn shuffle<T>(items: &mut [T], rng: &mut SplitMix64) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// A smallest set of servers meeting every edge (a bitmask of servers), by branch and bound:
/// take an edge no chosen server meets and try each of its servers; prune when the chosen
/// servers plus a lower bound (edges pairwise disjoint among those not met, each needing its own
/// server) cannot beat the best found.
struct HittingSet<'a> {
    edges: &'a [u64],
    best: usize,
    nodes: u64,
}

impl HittingSet<'_> {
    /// `None` when the node budget ran out.
    fn run(&mut self, chosen: u64, count: usize) -> Option<()> {
        self.nodes += 1;
        if self.nodes > EXACT_SEARCH_NODES_MAX {
            return None;
        }
        let mut first_unmet = None;
        let mut disjoint = 0u64;
        let mut bound = 0;
        for &edge in self.edges {
            if edge & chosen == 0 {
                first_unmet.get_or_insert(edge);
                if edge & disjoint == 0 {
                    disjoint |= edge;
                    bound += 1;
                }
            }
        }
        let Some(edge) = first_unmet else {
            self.best = self.best.min(count);
            return Some(());
        };
        if count + bound >= self.best {
            return Some(());
        }
        let mut rest = edge;
        while rest != 0 {
            let bit = rest & rest.wrapping_neg();
            rest &= rest - 1;
            self.run(chosen | bit, count + 1)?;
        }
        Some(())
    }
}

/// A largest set of servers containing no edge, by branch and bound: add candidates in order,
/// keeping only those that complete no edge with the set; prune when the set plus every
/// remaining candidate cannot beat the best found.
struct IndependentSet<'a> {
    /// The edges containing each server.
    edges_of: &'a [Vec<u64>],
    best: usize,
    nodes: u64,
}

impl IndependentSet<'_> {
    /// `None` when the node budget ran out.
    fn run(&mut self, chosen: u64, candidates: u64) -> Option<()> {
        self.nodes += 1;
        if self.nodes > EXACT_SEARCH_NODES_MAX {
            return None;
        }
        let count = chosen.count_ones() as usize;
        self.best = self.best.max(count);
        let mut rest = candidates;
        while rest != 0 {
            if count + rest.count_ones() as usize <= self.best {
                return Some(());
            }
            let v = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let with = chosen | 1u64 << v;
            // Candidates after v that can still join the set with v in it.
            let mut next = 0u64;
            let mut later = rest;
            while later != 0 {
                let c = later.trailing_zeros() as usize;
                later &= later - 1;
                let joined = with | 1u64 << c;
                if self.edges_of[c].iter().all(|&edge| edge & !joined != 0) {
                    next |= 1u64 << c;
                }
            }
            self.run(with, next)?;
        }
        Some(())
    }
}
