//! What the experiment reports: each case, Table 2's rows, the figures' series, the headline
//! and how they are drawn from the cases.

use super::*;

/// One (volume, day, grid point, algorithm).
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub volume: String,
    /// Counted from 1.
    pub day: usize,
    pub cache_pct: f64,
    pub warmup_pct: f64,
    pub region_bytes: u64,
    pub algorithm: Algorithm,
    pub th_v: f64,
    pub th_n: f64,
    pub preload_blocks: u64,
    pub preload_s: f64,
    /// T_converge; `None` (JSON `null`) when the cache never converged within the day.
    pub cold_converge_h: Option<f64>,
    pub warmed_converge_h: Option<f64>,
    /// (cold − (warmed + pre-load)) ÷ cold, %; `None` when cold converges at once or either
    /// never converged.
    pub converge_improvement_pct: Option<f64>,
    /// Equation 2 over cold's T_converge, %; `None` when it is empty or has no reads.
    pub load_reduction_cold_pct: Option<f64>,
    pub load_reduction_always_pct: Option<f64>,
    pub load_reduction_warmed_pct: Option<f64>,
}

/// A Table 3 row: medians over (volume, day) of each one's best algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct TableRow {
    pub cache_pct: f64,
    pub warmup_pct: f64,
    pub region_bytes: u64,
    pub th_v: f64,
    pub th_n: f64,
    /// (volume, day) pairs.
    pub cases: usize,
    pub preload_min: Option<f64>,
    /// Medians with "never converged" counted as later than any time: `None` when the median
    /// case never converged.
    pub cold_converge_h: Option<f64>,
    pub bonfire_converge_h: Option<f64>,
    pub converge_improvement_pct: Option<f64>,
    pub load_reduction_cold_pct: Option<f64>,
    pub load_reduction_always_pct: Option<f64>,
    pub load_reduction_bonfire_pct: Option<f64>,
    /// (Bonfire − cold) ÷ cold, % (the paper's measure; it grows without bound as cold's
    /// reduction nears zero: read it beside the gain in points).
    pub load_reduction_improvement_pct: Option<f64>,
    /// Bonfire − cold, percentage points of the read blocks served by the cache.
    pub load_reduction_gain_points: Option<f64>,
}

/// Figures 6–7 for one volume on one day, at the middle setting.
#[derive(Clone, Debug, Serialize)]
pub struct FigureDay {
    pub volume: String,
    pub day: usize,
    /// `None`: never converged within the day.
    pub cold_converge_h: Option<f64>,
    pub load_reduction_cold_pct: Option<f64>,
    pub load_reduction_always_pct: Option<f64>,
    pub algorithms: Vec<AlgorithmResult>,
    /// Per interval of the day: always-warm, cold, then each algorithm's read hit rate.
    pub hit_rates: Vec<Vec<Option<f64>>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AlgorithmResult {
    pub algorithm: Algorithm,
    /// `None`: never converged within the day.
    pub converge_h: Option<f64>,
    pub load_reduction_pct: Option<f64>,
}

/// How the algorithms fared at the middle setting over every warmed (volume, day).
#[derive(Clone, Debug, Serialize)]
pub struct Headline {
    pub cases: usize,
    pub algorithms: Vec<AlgorithmTally>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AlgorithmTally {
    pub algorithm: Algorithm,
    /// Cases where its T_converge is the smallest (ties count for every algorithm tied).
    pub best_converge: usize,
    /// Cases where its load reduction is the largest (ties likewise).
    pub best_load: usize,
    /// Cases where it converges strictly sooner than cold.
    pub converges_sooner_than_cold: usize,
    /// Cases where it converges no later than cold.
    pub converges_no_later_than_cold: usize,
    /// Cases where its load reduction exceeds cold's.
    pub reduces_more_load_than_cold: usize,
    pub median_converge_h: Option<f64>,
    pub median_load_reduction_pct: Option<f64>,
}

/// §4.3.3: a daily-pattern volume with days starting at its daily reaccess hour.
#[derive(Clone, Debug, Serialize)]
pub struct ShiftedDaily {
    pub volume: String,
    pub day_start_hour: u32,
    pub headline: Headline,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub source: String,
    pub day_s: f64,
    pub interval_s: f64,
    pub day_start_hour: Option<u32>,
    pub middle: Setting,
    pub figure_day: Option<usize>,
    pub preload_mb_per_s: f64,
    pub readahead_bytes: u64,
    pub volumes: Vec<VolumeSummary>,
    /// Table 3 over the whole grid.
    pub table: Vec<TableRow>,
    pub figures: Vec<FigureDay>,
    pub headline: Headline,
    pub shifted_daily: Vec<ShiftedDaily>,
    /// Table 4 per volume: monitoring the day before the figure day, pre-loading Last-K of
    /// 4 KiB blocks of the middle warm-up size.
    pub overheads: Vec<Overhead>,
    /// Requests that arrived after their day had been closed (traces ordered by completion),
    /// counted in the day being filled.
    pub late_requests: u64,
    #[serde(skip)]
    pub cases: Vec<Case>,
}

pub(super) fn pct(x: Option<f64>) -> Option<f64> {
    x.map(|x| x * 100.0)
}

/// The median of the values present.
pub fn median(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().flatten().collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// A convergence time for comparisons: never is later than any time.
pub fn later_if_never(h: Option<f64>) -> f64 {
    h.unwrap_or(f64::INFINITY)
}

/// The median of convergence times, "never" counted as later than any: `None` when the median
/// itself never converged (or there are none).
pub fn median_converge(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    median(values.into_iter().map(|v| Some(later_if_never(v)))).filter(|m| m.is_finite())
}

/// Orders cases best first: sooner convergence, then more load reduction.
pub(super) fn better(a: &Case, b: &Case) -> std::cmp::Ordering {
    later_if_never(a.warmed_converge_h)
        .total_cmp(&later_if_never(b.warmed_converge_h))
        .then(
            b.load_reduction_warmed_pct
                .unwrap_or(-1.0)
                .total_cmp(&a.load_reduction_warmed_pct.unwrap_or(-1.0)),
        )
}

pub(super) fn same_point(
    c: &Case,
    cache: f64,
    warmup: f64,
    region: u64,
    th_v: f64,
    th_n: f64,
) -> bool {
    c.cache_pct == cache
        && c.warmup_pct == warmup
        && c.region_bytes == region
        && c.th_v == th_v
        && c.th_n == th_n
}

/// Groups the cases of one grid point by (volume, day).
pub(super) fn by_volume_day<'a>(cases: impl Iterator<Item = &'a Case>) -> Vec<Vec<&'a Case>> {
    let mut groups: Vec<Vec<&Case>> = Vec::new();
    for c in cases {
        match groups
            .iter_mut()
            .find(|g| g[0].volume == c.volume && g[0].day == c.day)
        {
            Some(g) => g.push(c),
            None => groups.push(vec![c]),
        }
    }
    groups
}

pub(super) fn table(cases: &[Case], o: &Options) -> Vec<TableRow> {
    let mut rows = Vec::new();
    for &cache in &o.cache_pcts {
        for &warmup in &o.warmup_pcts {
            for &region in &o.region_bytes {
                for &th_v in &o.th_vs {
                    for &th_n in &o.th_ns {
                        let groups = by_volume_day(
                            cases
                                .iter()
                                .filter(|c| same_point(c, cache, warmup, region, th_v, th_n)),
                        );
                        let best: Vec<&Case> = groups
                            .iter()
                            .map(|g| *g.iter().min_by(|a, b| better(a, b)).expect("not empty"))
                            .collect();
                        rows.push(TableRow {
                            cache_pct: cache,
                            warmup_pct: warmup,
                            region_bytes: region,
                            th_v,
                            th_n,
                            cases: best.len(),
                            preload_min: median(best.iter().map(|c| Some(c.preload_s / 60.0))),
                            cold_converge_h: median_converge(
                                best.iter().map(|c| c.cold_converge_h),
                            ),
                            bonfire_converge_h: median_converge(
                                best.iter().map(|c| c.warmed_converge_h),
                            ),
                            converge_improvement_pct: median(
                                best.iter().map(|c| c.converge_improvement_pct),
                            ),
                            load_reduction_cold_pct: median(
                                best.iter().map(|c| c.load_reduction_cold_pct),
                            ),
                            load_reduction_always_pct: median(
                                best.iter().map(|c| c.load_reduction_always_pct),
                            ),
                            load_reduction_bonfire_pct: median(
                                best.iter().map(|c| c.load_reduction_warmed_pct),
                            ),
                            load_reduction_improvement_pct: median(best.iter().map(|c| {
                                match (c.load_reduction_warmed_pct, c.load_reduction_cold_pct) {
                                    (Some(w), Some(k)) if k > 0.0 => Some(100.0 * (w - k) / k),
                                    _ => None,
                                }
                            })),
                            load_reduction_gain_points: median(best.iter().map(|c| {
                                Some(c.load_reduction_warmed_pct? - c.load_reduction_cold_pct?)
                            })),
                        });
                    }
                }
            }
        }
    }
    rows
}

pub(super) fn headline<'a>(cases: impl Iterator<Item = &'a Case>) -> Headline {
    let groups = by_volume_day(cases);
    let algorithms = ALGORITHMS
        .iter()
        .map(|&alg| {
            let mine: Vec<(&Vec<&Case>, &Case)> = groups
                .iter()
                .filter_map(|g| g.iter().find(|c| c.algorithm == alg).map(|c| (g, *c)))
                .collect();
            let count = |f: &dyn Fn(&Vec<&Case>, &Case) -> bool| {
                mine.iter().filter(|(g, c)| f(g, c)).count()
            };
            AlgorithmTally {
                algorithm: alg,
                best_converge: count(&|g, c| {
                    g.iter().all(|o| {
                        later_if_never(c.warmed_converge_h) <= later_if_never(o.warmed_converge_h)
                    })
                }),
                best_load: count(&|g, c| {
                    g.iter().all(|o| {
                        c.load_reduction_warmed_pct.unwrap_or(-1.0)
                            >= o.load_reduction_warmed_pct.unwrap_or(-1.0)
                    })
                }),
                converges_sooner_than_cold: count(&|_, c| {
                    later_if_never(c.warmed_converge_h) < later_if_never(c.cold_converge_h)
                }),
                converges_no_later_than_cold: count(&|_, c| {
                    later_if_never(c.warmed_converge_h) <= later_if_never(c.cold_converge_h)
                }),
                reduces_more_load_than_cold: count(&|_, c| {
                    matches!(
                        (c.load_reduction_warmed_pct, c.load_reduction_cold_pct),
                        (Some(w), Some(k)) if w > k
                    )
                }),
                median_converge_h: median_converge(mine.iter().map(|(_, c)| c.warmed_converge_h)),
                median_load_reduction_pct: median(
                    mine.iter().map(|(_, c)| c.load_reduction_warmed_pct),
                ),
            }
        })
        .collect();
    Headline {
        cases: groups.len(),
        algorithms,
    }
}

pub(super) fn at_middle<'a>(
    cases: &'a [Case],
    m: &'a Setting,
) -> impl Iterator<Item = &'a Case> + 'a {
    cases
        .iter()
        .filter(move |c| same_point(c, m.cache_pct, m.warmup_pct, m.region_bytes, m.th_v, m.th_n))
}
