//! Placement policies (§3.4, §3.6, §5): the stripe unit rule, the greedy partitioner of narrow
//! striping with anti-correlation pairing, and the paper's advice as a function that explains
//! its choice.

use cordillera_types::rng::{below, SplitMix64};

/// The paper's default stripe units when nothing is known of a store's requests but their kind
/// (§3.2.1: 1 MB for large requests, 32 KB for small).
pub const DEFAULT_LARGE_STRIPE_UNIT: u64 = 1 << 20;
pub const DEFAULT_SMALL_STRIPE_UNIT: u64 = 32 << 10;
/// Bounds of a chosen stripe unit.
pub const MIN_STRIPE_UNIT: u64 = 4 << 10;
pub const MAX_STRIPE_UNIT: u64 = 16 << 20;

/// What is known of a store's requests at allocation time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Knowledge {
    pub mean_request_bytes: Option<u64>,
    /// Requests are large (megabytes: streaming) rather than small; used when the mean is not
    /// known.
    pub large_requests: Option<bool>,
    pub read_iops: Option<f64>,
    pub write_iops: Option<f64>,
}

/// The stripe unit for a store: half its mean request size (§3.2.2, §3.6: "a good rule of
/// thumb"), rounded to the nearest power of two within 4 KiB … 16 MiB; without a mean, the
/// paper's default for its kind of requests (small if unknown).
pub fn stripe_unit(k: &Knowledge) -> u64 {
    match k.mean_request_bytes {
        Some(mean) if mean > 0 => {
            let half = (mean / 2).max(1);
            let below = 1u64 << (63 - half.leading_zeros());
            let above = below << 1;
            let nearest = if half - below <= above - half {
                below
            } else {
                above
            };
            nearest.clamp(MIN_STRIPE_UNIT, MAX_STRIPE_UNIT)
        }
        _ if k.large_requests == Some(true) => DEFAULT_LARGE_STRIPE_UNIT,
        _ => DEFAULT_SMALL_STRIPE_UNIT,
    }
}

/// §3.4's load metric: write-weighted IOPS (a write may cost a RAID-5 read-modify-write, four
/// I/Os).
pub fn weighted_iops(read_iops: f64, write_iops: f64) -> f64 {
    read_iops + 4.0 * write_iops
}

/// A partition of items into `parts` sets.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// `assignment[i]`: the set of item i.
    pub assignment: Vec<usize>,
    pub loads: Vec<f64>,
    /// (max − min) / mean of the set loads.
    pub imbalance: f64,
    /// Random permutations tried.
    pub tries: u32,
}

/// §3.4's greedy partitioner: take a random permutation of the items and put each into the set
/// that leaves the least imbalance (the most loaded set's load minus the least loaded's);
/// repeat with fresh permutations until the imbalance is below `target` (0.01: 1 %) of the mean
/// set load, or `max_tries` permutations have been tried (the best found is returned).
pub fn greedy_partition(
    loads: &[f64],
    parts: usize,
    target: f64,
    max_tries: u32,
    seed: u64,
) -> Partition {
    assert!(parts > 0, "at least one set");
    let mut rng = SplitMix64(seed);
    let total: f64 = loads.iter().sum();
    let mean = total / parts as f64;
    let mut best: Option<Partition> = None;
    let mut order: Vec<usize> = (0..loads.len()).collect();
    let mut tries = 0;
    for attempt in 1..=max_tries.max(1) {
        tries = attempt;
        // Fisher–Yates.
        for i in (1..order.len()).rev() {
            let j = below(rng.next_u64(), i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let mut set_loads = vec![0.0; parts];
        let mut assignment = vec![0; loads.len()];
        for &item in &order {
            let mut choice = 0;
            let mut choice_spread = f64::INFINITY;
            for p in 0..parts {
                set_loads[p] += loads[item];
                let spread = spread(&set_loads);
                set_loads[p] -= loads[item];
                // Ties go to the least loaded set.
                if spread < choice_spread
                    || (spread == choice_spread && set_loads[p] < set_loads[choice])
                {
                    choice = p;
                    choice_spread = spread;
                }
            }
            set_loads[choice] += loads[item];
            assignment[item] = choice;
        }
        let imbalance = if mean > 0.0 {
            spread(&set_loads) / mean
        } else {
            0.0
        };
        if best.as_ref().is_none_or(|b| imbalance < b.imbalance) {
            best = Some(Partition {
                assignment,
                loads: set_loads,
                imbalance,
                tries: 0,
            });
        }
        if imbalance < target {
            break;
        }
    }
    let mut best = best.expect("one try at least");
    best.tries = tries;
    best
}

fn spread(loads: &[f64]) -> f64 {
    let max = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = loads.iter().copied().fold(f64::INFINITY, f64::min);
    max - min
}

/// Where a new narrow store goes when stores arrive one at a time: the least loaded array among
/// those with room (`fits`); between equally loaded arrays (nothing declared, say) the one with
/// the most free bytes, then the lower index. `None` if none has room.
pub fn least_loaded(loads: &[f64], free: &[u64], fits: &[bool]) -> Option<usize> {
    (0..loads.len())
        .filter(|&a| fits.get(a) == Some(&true))
        .min_by(|&a, &b| {
            loads[a]
                .total_cmp(&loads[b])
                .then(free[b].cmp(&free[a]))
                .then(a.cmp(&b))
        })
}

/// Pairs items so that each pair is as anti-correlated as can be found greedily: the most
/// negatively correlated pair first, then the next among the rest. `corr[i][j]` is the
/// correlation of items i and j (symmetric). An odd item out is left alone.
pub fn anticorrelated_pairs(corr: &[Vec<f64>]) -> (Vec<(usize, usize)>, Option<usize>) {
    let n = corr.len();
    let mut candidates: Vec<(f64, usize, usize)> = Vec::new();
    for (i, row) in corr.iter().enumerate() {
        for (j, &c) in row.iter().enumerate().skip(i + 1) {
            candidates.push((c, i, j));
        }
    }
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let mut used = vec![false; n];
    let mut pairs = Vec::new();
    for (_, i, j) in candidates {
        if !used[i] && !used[j] {
            used[i] = true;
            used[j] = true;
            pairs.push((i, j));
        }
    }
    let alone = (0..n).find(|&i| !used[i]);
    (pairs, alone)
}

/// The policy for a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Narrow,
    Wide,
}

/// What the deployment can offer, besides the store's own figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Setting {
    /// Expected utilization of the arrays (0 … 1), if known.
    pub utilization: Option<f64>,
    /// The workload (rates and correlations) is known precisely and stable.
    pub workload_known: bool,
    /// Data can be migrated between arrays to fix skew.
    pub migration: bool,
    /// The arrays schedule by quality of service (so wide striping can isolate stores).
    pub qos_scheduling: bool,
    /// Stores need different response-time or throughput guarantees.
    pub mixed_qos: bool,
}

/// Below this utilization the paper saw narrow striping win for small requests (§3.2.2,
/// Figure 4: its gains end as utilization rises past about 20–30 %).
pub const LOW_UTILIZATION: f64 = 0.3;
/// Requests at most this large count as small (the paper's small streams: 64 KB).
pub const SMALL_REQUEST: u64 = 64 << 10;

#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    pub policy: Policy,
    pub stripe_unit_bytes: u64,
    /// With mixed QoS needs and no QoS scheduling: group stores of like needs into partitions
    /// of the arrays and stripe wide within each (§3.6).
    pub partition_by_qos: bool,
    /// Why, one reason per line, naming the paper's finding behind it.
    pub reasons: Vec<String>,
}

/// The paper's advice (§3.6, §5): wide striping by default; narrow only when the workload is
/// known precisely, utilization stays low, migration can fix skew, and requests are small; the
/// stripe unit from the mean request size either way.
pub fn recommend(k: &Knowledge, s: &Setting) -> Recommendation {
    let su = stripe_unit(k);
    let mut reasons = Vec::new();
    reasons.push(match k.mean_request_bytes {
        Some(m) => format!(
            "stripe unit {} KiB: half the mean request of {} bytes, to the nearest power of two (§3.6: \"a good rule of thumb\")",
            su >> 10,
            m
        ),
        None => format!(
            "stripe unit {} KiB: the paper's default for {} requests, the mean request size being unknown (give it: the stripe unit is the one critical choice of wide striping, §3.6)",
            su >> 10,
            if k.large_requests == Some(true) { "large" } else { "small" }
        ),
    });
    let small = k
        .mean_request_bytes
        .map(|m| m <= SMALL_REQUEST)
        .or(k.large_requests.map(|l| !l));
    let low = s.utilization.map(|u| u < LOW_UTILIZATION);
    let mut narrow = true;
    if !s.workload_known {
        narrow = false;
        reasons.push("wide: the workload is not known precisely, and narrow placement is only as good as the rates and correlations it is given (§3.4: arrays balanced on mean load still skew over time)".into());
    }
    match low {
        Some(false) => {
            narrow = false;
            reasons.push(format!(
                "wide: utilization {:.0} % is not low; wide striping wins as load rises, for small and large requests (§3.2.2, Figure 4)",
                s.utilization.unwrap_or(0.0) * 100.0
            ));
        }
        None => {
            narrow = false;
            reasons.push("wide: the utilization is not known, and narrow striping wins only at low utilization (Figure 4)".into());
        }
        Some(true) => {}
    }
    match small {
        Some(false) => {
            narrow = false;
            reasons.push(
                "wide: large requests gain from the parallelism of more arrays (Figures 2, 5)"
                    .into(),
            );
        }
        None => {
            narrow = false;
            reasons.push(
                "wide: request sizes are unknown; narrow striping helps small requests only".into(),
            );
        }
        Some(true) => {}
    }
    if !s.migration {
        narrow = false;
        reasons.push("wide: without migration, a narrow layout cannot fix the skews real workloads bring (§3.6)".into());
    }
    if narrow {
        reasons.push(format!(
            "narrow: the workload is known, utilization {:.0} % is low, requests are small, and migration can fix skew — the conditions of §3.6 under which an ideal narrow layout wins; co-locate anti-correlated stores",
            s.utilization.unwrap_or(0.0) * 100.0
        ));
    }
    let partition_by_qos = s.mixed_qos && !s.qos_scheduling;
    if partition_by_qos {
        reasons.push("stores need different service levels and the arrays do not schedule by QoS: group stores of like needs into partitions of the arrays and stripe wide within each (§3.6)".into());
    }
    Recommendation {
        policy: if narrow { Policy::Narrow } else { Policy::Wide },
        stripe_unit_bytes: su,
        partition_by_qos,
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_narrow_store_goes_to_the_least_loaded_array_with_room() {
        assert_eq!(
            least_loaded(&[5.0, 1.0, 1.0], &[10, 20, 30], &[true, true, true]),
            Some(2)
        );
        assert_eq!(
            least_loaded(&[5.0, 1.0, 0.0], &[10, 20, 30], &[true, true, false]),
            Some(1)
        );
        assert_eq!(least_loaded(&[0.0, 0.0], &[10, 10], &[true, true]), Some(0));
        assert_eq!(least_loaded(&[0.0, 0.0], &[10, 10], &[false, false]), None);
    }

    #[test]
    fn stripe_unit_is_half_the_mean_or_the_papers_default() {
        let mean = |m| {
            stripe_unit(&Knowledge {
                mean_request_bytes: Some(m),
                ..Default::default()
            })
        };
        assert_eq!(mean(2 << 20), 1 << 20, "2 MB requests: 1 MB (§3.2)");
        assert_eq!(mean(64 << 10), 32 << 10, "64 KB requests: 32 KB");
        assert_eq!(
            mean(15_509),
            8 << 10,
            "WebSearch 1's 15.5 KB: 7.75 KB → 8 KiB"
        );
        assert_eq!(
            mean(3_466),
            4 << 10,
            "Financial 1's 3.4 KB: the 4 KiB floor"
        );
        assert_eq!(mean(1 << 30), 16 << 20, "ceiling");
        let kind = |l| {
            stripe_unit(&Knowledge {
                large_requests: l,
                ..Default::default()
            })
        };
        assert_eq!(kind(Some(true)), 1 << 20);
        assert_eq!(kind(Some(false)), 32 << 10);
        assert_eq!(kind(None), 32 << 10);
    }

    #[test]
    fn the_greedy_partitioner_balances_within_one_percent() {
        // 52 streams of uneven load over 4 sets, as §3.4.
        let mut rng = SplitMix64(7);
        let loads: Vec<f64> = (0..52).map(|_| 1.0 + 300.0 * rng.unit().powi(3)).collect();
        let p = greedy_partition(&loads, 4, 0.01, 10_000, 1);
        assert!(p.imbalance < 0.01 && p.tries < 10_000, "{p:?}");
        let total: f64 = loads.iter().sum();
        assert!((p.loads.iter().sum::<f64>() - total).abs() < 1e-6);
        for (set, load) in p.loads.iter().enumerate() {
            let summed: f64 = (0..loads.len())
                .filter(|&i| p.assignment[i] == set)
                .map(|i| loads[i])
                .sum();
            assert!((summed - load).abs() < 1e-6);
        }
        // Another seed gives another (still balanced) partition.
        let q = greedy_partition(&loads, 4, 0.01, 10_000, 2);
        assert!(q.imbalance < 0.01);
        assert_ne!(p.assignment, q.assignment);
        // An impossible target returns the best of the tries.
        let r = greedy_partition(&[10.0, 1.0], 2, 0.01, 50, 1);
        assert_eq!(r.tries, 50, "every try made");
        assert!((r.imbalance - 9.0 / 5.5).abs() < 1e-9);
    }

    #[test]
    fn writes_weigh_four() {
        assert_eq!(weighted_iops(28.27, 93.79), 28.27 + 4.0 * 93.79);
    }

    #[test]
    fn anticorrelated_items_are_paired() {
        // L0 S0 L1 S1: each L anti-correlated with its S, the rest uncorrelated or correlated.
        let corr = vec![
            vec![1.0, -1.0, 0.5, 0.0],
            vec![-1.0, 1.0, 0.0, 0.5],
            vec![0.5, 0.0, 1.0, -0.8],
            vec![0.0, 0.5, -0.8, 1.0],
        ];
        assert_eq!(anticorrelated_pairs(&corr), (vec![(0, 1), (2, 3)], None));
        let three = vec![
            vec![1.0, 0.2, -0.3],
            vec![0.2, 1.0, 0.1],
            vec![-0.3, 0.1, 1.0],
        ];
        assert_eq!(anticorrelated_pairs(&three), (vec![(0, 2)], Some(1)));
    }

    #[test]
    fn the_advice_is_wide_unless_every_condition_for_narrow_holds() {
        let small = Knowledge {
            mean_request_bytes: Some(8 << 10),
            ..Default::default()
        };
        let ideal = Setting {
            utilization: Some(0.15),
            workload_known: true,
            migration: true,
            ..Default::default()
        };
        let r = recommend(&small, &ideal);
        assert_eq!(r.policy, Policy::Narrow, "{:#?}", r.reasons);
        assert_eq!(r.stripe_unit_bytes, 4 << 10);
        for spoil in [
            Setting {
                utilization: Some(0.6),
                ..ideal
            },
            Setting {
                utilization: None,
                ..ideal
            },
            Setting {
                workload_known: false,
                ..ideal
            },
            Setting {
                migration: false,
                ..ideal
            },
        ] {
            let r = recommend(&small, &spoil);
            assert_eq!(r.policy, Policy::Wide, "{spoil:?}");
            assert!(
                r.reasons.iter().any(|l| l.starts_with("wide:")),
                "{:#?}",
                r.reasons
            );
        }
        let large = Knowledge {
            mean_request_bytes: Some(2 << 20),
            ..Default::default()
        };
        let r = recommend(&large, &ideal);
        assert_eq!((r.policy, r.stripe_unit_bytes), (Policy::Wide, 1 << 20));
        let r = recommend(&Knowledge::default(), &Setting::default());
        assert_eq!((r.policy, r.stripe_unit_bytes), (Policy::Wide, 32 << 10));
        assert!(!r.partition_by_qos);
        let r = recommend(
            &small,
            &Setting {
                mixed_qos: true,
                ..ideal
            },
        );
        assert!(r.partition_by_qos && r.reasons.iter().any(|l| l.contains("QoS")));
    }
}
