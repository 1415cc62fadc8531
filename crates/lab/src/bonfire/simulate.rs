//! The cache simulations behind the report: each volume's days, every setting of the grid,
//! with and without warm-up.

use super::*;

/// The simulated series of one (volume, day, cache size).
pub(super) struct DaySeries {
    pub(super) volume: usize,
    pub(super) day: usize,
    pub(super) cache_pct: f64,
    pub(super) intervals: usize,
    pub(super) always: Vec<Interval>,
    pub(super) cold: Vec<Interval>,
    /// (warm-up %, region, algorithm, pre-loaded blocks, series)
    pub(super) warmed: Vec<(f64, u64, Algorithm, u64, Vec<Interval>)>,
}

/// A volume's requests in time order and its days.
pub(super) struct VolumeDays {
    pub(super) name: String,
    pub(super) records: Vec<Record>,
    pub(super) wss: u64,
    pub(super) origin_ns: i64,
    /// Record index where each day starts, and one past the end.
    pub(super) bounds: Vec<usize>,
}

impl VolumeDays {
    pub(super) fn new(
        name: String,
        mut records: Vec<Record>,
        origin_ns: i64,
        day_ns: i64,
    ) -> VolumeDays {
        records.sort_by_key(|r| r.time_ns);
        let wss = algorithms::working_set_blocks(&records);
        let last = records.last().map_or(origin_ns, |r| r.time_ns);
        let days = ((last - origin_ns) / day_ns + 1).max(1) as usize;
        let bounds = (0..=days)
            .map(|d| records.partition_point(|r| r.time_ns < origin_ns + d as i64 * day_ns))
            .collect();
        VolumeDays {
            name,
            records,
            wss,
            origin_ns,
            bounds,
        }
    }

    pub(super) fn days(&self) -> usize {
        self.bounds.len() - 1
    }

    pub(super) fn day(&self, d: usize) -> &[Record] {
        &self.records[self.bounds[d]..self.bounds[d + 1]]
    }

    pub(super) fn day_start(&self, d: usize, day_ns: i64) -> i64 {
        self.origin_ns + d as i64 * day_ns
    }

    pub(super) fn blocks(&self, pct: f64) -> u64 {
        ((self.wss as f64 * pct / 100.0).round() as u64).max(1)
    }
}

/// The grid one simulation pass covers.
pub(super) struct Grid<'a> {
    pub(super) cache_pcts: &'a [f64],
    pub(super) warmup_pcts: &'a [f64],
    pub(super) regions: &'a [u64],
}

/// Runs every (volume, cache size) of `grid` on `threads` threads.
pub(super) fn simulate(
    volumes: &[VolumeDays],
    grid: &Grid,
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Vec<DaySeries> {
    let tasks: Vec<(usize, f64)> = (0..volumes.len())
        .flat_map(|v| grid.cache_pcts.iter().map(move |c| (v, *c)))
        .filter(|(v, _)| volumes[*v].days() >= 2)
        .collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let out = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..o.threads.min(tasks.len()).max(1) {
            s.spawn(|| loop {
                let t = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(v, cache_pct)) = tasks.get(t) else {
                    break;
                };
                let series = simulate_one(&volumes[v], v, cache_pct, grid, o);
                out.lock().expect("no panics").extend(series);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                progress(&format!(
                    "{} at cache {cache_pct} % simulated ({n}/{})",
                    volumes[v].name,
                    tasks.len()
                ));
            });
        }
    });
    let mut out = out.into_inner().expect("no panics");
    out.sort_by(|a, b| {
        (a.volume, a.day)
            .cmp(&(b.volume, b.day))
            .then(a.cache_pct.total_cmp(&b.cache_pct))
    });
    out
}

pub(super) fn simulate_one(
    vol: &VolumeDays,
    v: usize,
    cache_pct: f64,
    grid: &Grid,
    o: &Options,
) -> Vec<DaySeries> {
    let capacity = vol.blocks(cache_pct) as usize;
    let per_day = o.intervals_per_day();
    let timeline = |start_ns| Timeline {
        start_ns,
        interval_ns: o.interval_ns,
        readahead_bytes: o.readahead_bytes,
    };
    let mut always = Scheme::new(Lru::new(capacity));
    always.run(&vol.records, timeline(vol.origin_ns));
    let last_ns = vol.records.last().map_or(vol.origin_ns, |r| r.time_ns);
    let mut out = Vec::new();
    for d in 1..vol.days() {
        let start = vol.day_start(d, o.day_ns);
        // The intervals this day covers (the last day may end early).
        let intervals = (((last_ns - start) / o.interval_ns) as usize + 1).min(per_day);
        let fit = |mut s: Vec<Interval>| {
            s.resize(intervals, Interval::default());
            s
        };
        let always_day: Vec<Interval> = (0..intervals)
            .map(|i| {
                always
                    .intervals
                    .get(d * per_day + i)
                    .copied()
                    .unwrap_or_default()
            })
            .collect();
        let mut cold = Scheme::new(Lru::new(capacity));
        cold.run(vol.day(d), timeline(start));
        let mut warmed = Vec::new();
        for &warmup_pct in grid.warmup_pcts {
            let warmup_bytes = vol.blocks(warmup_pct) * BLOCK_BYTES;
            for &region in grid.regions {
                for alg in ALGORITHMS {
                    let preload =
                        algorithms::select(vol.day(d - 1), alg, region, warmup_bytes, o.seed);
                    let mut s = Scheme::new(Lru::new(capacity));
                    s.preload(preload.iter().copied());
                    s.run(vol.day(d), timeline(start));
                    warmed.push((
                        warmup_pct,
                        region,
                        alg,
                        preload.len() as u64,
                        fit(s.intervals),
                    ));
                }
            }
        }
        out.push(DaySeries {
            volume: v,
            day: d,
            cache_pct,
            intervals,
            always: always_day,
            cold: fit(cold.intervals),
            warmed,
        });
    }
    out
}

/// Cases of every series at every threshold pair.
pub(super) fn cases(series: &[DaySeries], volumes: &[VolumeDays], o: &Options) -> Vec<Case> {
    let hours = |intervals: usize| intervals as f64 * o.interval_ns as f64 / NS_PER_HOUR as f64;
    let mut out = Vec::new();
    for s in series {
        for &th_v in &o.th_vs {
            for &th_n in &o.th_ns {
                let cold_t = schemes::convergence(&s.cold, &s.always, th_v, th_n);
                let cold_h = cold_t.map(hours);
                // Equation 2 over cold's T_converge, or the whole day if cold never converged.
                let window = cold_t.unwrap_or(s.cold.len());
                let always_slr = pct(schemes::server_load_reduction(&s.always, window));
                let cold_slr = pct(schemes::server_load_reduction(&s.cold, window));
                for (warmup_pct, region, alg, blocks, w) in &s.warmed {
                    let warmed_h = schemes::convergence(w, &s.always, th_v, th_n).map(hours);
                    let preload_s = (*blocks * BLOCK_BYTES) as f64 / (o.preload_mb_per_s * 1e6);
                    out.push(Case {
                        volume: volumes[s.volume].name.clone(),
                        day: s.day + 1,
                        cache_pct: s.cache_pct,
                        warmup_pct: *warmup_pct,
                        region_bytes: *region,
                        algorithm: *alg,
                        th_v,
                        th_n,
                        preload_blocks: *blocks,
                        preload_s,
                        cold_converge_h: cold_h,
                        warmed_converge_h: warmed_h,
                        converge_improvement_pct: match (cold_h, warmed_h) {
                            (Some(c), Some(w)) => {
                                schemes::converge_improvement_pct(c, w, preload_s / 3600.0)
                            }
                            _ => None,
                        },
                        load_reduction_cold_pct: cold_slr,
                        load_reduction_always_pct: always_slr,
                        load_reduction_warmed_pct: pct(schemes::server_load_reduction(w, window)),
                    });
                }
            }
        }
    }
    out
}
