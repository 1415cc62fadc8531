//! The cache simulations behind the report: each volume's days, every setting of the grid,
//! with and without warm-up.

use super::*;

/// The simulated series of one (view, day, cache size).
pub(super) struct DaySeries {
    /// The index of the [`View`] (a volume's own days come first, then shifted ones).
    pub(super) volume: usize,
    pub(super) day: usize,
    pub(super) cache_pct: f64,
    pub(super) intervals: usize,
    pub(super) always: Vec<Interval>,
    pub(super) cold: Vec<Interval>,
    /// (warm-up %, region, algorithm, pre-loaded blocks, series)
    pub(super) warmed: Vec<(f64, u64, Algorithm, u64, Vec<Interval>)>,
}

/// What the first pass learns of a volume.
#[derive(Default)]
pub(super) struct VolumeStats {
    pub(super) first_ns: i64,
    pub(super) last_ns: i64,
    pub(super) requests: usize,
    pub(super) reads: usize,
    pub(super) wss: u64,
}

/// One way of cutting a volume into days, and the grid simulated on each day: the volume's own
/// days, or (§4.3.3) its days starting at the hour of its daily reaccesses.
pub(super) struct View {
    pub(super) name: String,
    /// The trace's index of the volume.
    pub(super) volume: usize,
    pub(super) wss: u64,
    pub(super) origin_ns: i64,
    pub(super) last_ns: i64,
    pub(super) days: usize,
    pub(super) cache_pcts: Vec<f64>,
    pub(super) warmup_pcts: Vec<f64>,
    pub(super) regions: Vec<u64>,
    /// Keep this day's requests (Table 4 monitors it).
    pub(super) keep_day: Option<usize>,
}

impl View {
    pub(super) fn blocks(&self, pct: f64) -> u64 {
        ((self.wss as f64 * pct / 100.0).round() as u64).max(1)
    }

    /// The view's cache sizes in blocks, ascending and distinct (what [`MultiScheme`] takes),
    /// and for each of `cache_pcts` its index among them.
    pub(super) fn sizes(&self) -> (Vec<usize>, Vec<usize>) {
        let blocks: Vec<usize> = self
            .cache_pcts
            .iter()
            .map(|&c| self.blocks(c) as usize)
            .collect();
        let mut sizes = blocks.clone();
        sizes.sort_unstable();
        sizes.dedup();
        let index = blocks
            .iter()
            .map(|b| sizes.binary_search(b).expect("a size of the list"))
            .collect();
        (sizes, index)
    }

    pub(super) fn day_of(&self, time_ns: i64, day_ns: i64) -> usize {
        (((time_ns - self.origin_ns).max(0)) / day_ns) as usize
    }

    pub(super) fn day_start(&self, d: usize, day_ns: i64) -> i64 {
        self.origin_ns + d as i64 * day_ns
    }
}

/// A view's state during the second pass.
struct Streaming {
    day: usize,
    filling: Vec<Record>,
    previous: Option<Arc<Vec<Record>>>,
    /// The always-warm caches (every cache size), running since the trace start.
    always: MultiScheme,
    kept: Option<Arc<Vec<Record>>>,
}

/// One (view, day ≥ 1): warm-up from the day before, cold and warmed caches over the day.
struct DayTask {
    view: usize,
    day: usize,
    previous: Arc<Vec<Record>>,
    records: Arc<Vec<Record>>,
}

/// What the second pass leaves: every (view, day, cache size)'s series, and the kept days.
pub(super) struct Simulated {
    pub(super) series: Vec<DaySeries>,
    pub(super) kept: Vec<Option<Arc<Vec<Record>>>>,
    /// Requests that arrived after their day had been closed (traces ordered by completion);
    /// they were counted in the day being filled.
    pub(super) late: u64,
}

/// The second pass: streams `reader`'s records through every view. A view holds the day
/// being filled and the day before (the warm-up history); each finished day goes to a worker
/// thread, which runs its cold and warmed caches, while the always-warm caches run here in
/// order. Memory: two days of requests per view, the caches and the tasks in flight (at most
/// two per thread), never the whole trace.
pub(super) fn simulate_stream(
    reader: &mut dyn RecordReader,
    views: &[View],
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Simulated, String> {
    let per_day = o.intervals_per_day();
    let mut by_volume: Vec<Vec<usize>> = Vec::new();
    for (i, v) in views.iter().enumerate() {
        if by_volume.len() <= v.volume {
            by_volume.resize_with(v.volume + 1, Vec::new);
        }
        by_volume[v.volume].push(i);
    }
    let mut state: Vec<Streaming> = views
        .iter()
        .map(|v| Streaming {
            day: 0,
            filling: Vec::new(),
            previous: None,
            always: MultiScheme::new(&v.sizes().0, o.readahead_bytes),
            kept: None,
        })
        .collect();
    let tasks_total: usize = views.iter().map(|v| v.days.saturating_sub(1)).sum();
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<DaySeries>> = Mutex::new(Vec::new());
    let threads = o.threads.max(1);
    let (send, receive) = std::sync::mpsc::sync_channel::<DayTask>(threads);
    let receive = Mutex::new(receive);
    let mut late = 0u64;
    let outcome: Result<(), String> = std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let task = match receive.lock().expect("no panics").recv() {
                    Ok(t) => t,
                    Err(_) => break,
                };
                let view = &views[task.view];
                let series =
                    simulate_day(view, task.view, task.day, &task.previous, &task.records, o);
                results.lock().expect("no panics").extend(series);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                progress(&format!(
                    "{} day {} simulated ({n}/{tasks_total} days)",
                    view.name,
                    task.day + 1
                ));
            });
        }
        // Closes `view`'s days up to (not including) `until`.
        let close = |i: usize, s: &mut Streaming, until: usize| -> Result<(), String> {
            let view = &views[i];
            while s.day < until {
                let mut records = std::mem::take(&mut s.filling);
                records.sort_by_key(|r| r.time_ns);
                let start = view.day_start(0, o.day_ns);
                s.always.run(
                    &records,
                    Timeline {
                        start_ns: start,
                        interval_ns: o.interval_ns,
                        readahead_bytes: o.readahead_bytes,
                    },
                );
                let records = Arc::new(records);
                if view.keep_day == Some(s.day) {
                    s.kept = Some(records.clone());
                }
                if let Some(previous) = s.previous.take() {
                    if s.day < view.days {
                        send.send(DayTask {
                            view: i,
                            day: s.day,
                            previous,
                            records: records.clone(),
                        })
                        .map_err(|_| "a simulation thread stopped".to_owned())?;
                    }
                }
                s.previous = Some(records);
                s.day += 1;
            }
            Ok(())
        };
        let mut read = || -> Result<(), String> {
            while let Some(r) = reader.next_record().map_err(|e| e.to_string())? {
                let Some(list) = by_volume.get(r.volume.index()) else {
                    continue;
                };
                for &i in list {
                    let s = &mut state[i];
                    let day = views[i].day_of(r.time_ns, o.day_ns);
                    if day > s.day {
                        close(i, s, day)?;
                    } else if day < s.day {
                        late += 1;
                    }
                    s.filling.push(r);
                }
            }
            for (i, s) in state.iter_mut().enumerate() {
                let until = views[i].days;
                close(i, s, until.max(s.day + 1))?;
            }
            Ok(())
        };
        let outcome = read();
        drop(send);
        outcome
    });
    outcome?;
    let mut series = results.into_inner().expect("no panics");
    // The always-warm series of each day, from the caches that ran since the start.
    for s in &mut series {
        let view = &views[s.volume];
        let k = view
            .cache_pcts
            .iter()
            .position(|c| *c == s.cache_pct)
            .expect("a size of the view");
        let always = &state[s.volume].always.intervals[view.sizes().1[k]];
        s.always = (0..s.intervals)
            .map(|i| always.get(s.day * per_day + i).copied().unwrap_or_default())
            .collect();
    }
    series.sort_by(|a, b| {
        (a.volume, a.day)
            .cmp(&(b.volume, b.day))
            .then(a.cache_pct.total_cmp(&b.cache_pct))
    });
    Ok(Simulated {
        series,
        kept: state.into_iter().map(|s| s.kept).collect(),
        late,
    })
}

/// Day `d` of `view` at every cache size: cold, and warmed by every (warm-up, region,
/// algorithm) from the day before. The always-warm series is filled in by the caller.
fn simulate_day(
    view: &View,
    v: usize,
    d: usize,
    previous: &[Record],
    records: &[Record],
    o: &Options,
) -> Vec<DaySeries> {
    let per_day = o.intervals_per_day();
    let start = view.day_start(d, o.day_ns);
    let timeline = Timeline {
        start_ns: start,
        interval_ns: o.interval_ns,
        readahead_bytes: o.readahead_bytes,
    };
    // The intervals this day covers (the last day may end early).
    let intervals = (((view.last_ns - start) / o.interval_ns).max(0) as usize + 1).min(per_day);
    let fit = |mut s: Vec<Interval>| {
        s.resize(intervals, Interval::default());
        s
    };
    // The warm-up choices do not depend on the cache size.
    let mut preloads = Vec::new();
    for &warmup_pct in &view.warmup_pcts {
        let warmup_bytes = view.blocks(warmup_pct) * BLOCK_BYTES;
        for &region in &view.regions {
            for alg in ALGORITHMS {
                preloads.push((
                    warmup_pct,
                    region,
                    alg,
                    algorithms::select(previous, alg, region, warmup_bytes, o.seed),
                ));
            }
        }
    }
    // Every cache size in one pass (LRU's stack property). Without read-ahead the warmed
    // caches follow from the cold run (`ColdRun`); with it each is simulated, one at a time
    // and dropped once its series are taken.
    let (sizes, index) = view.sizes();
    let (cold, warmed): (Vec<Vec<Interval>>, Vec<_>) = if o.readahead_bytes == 0 {
        let run = ColdRun::new(&sizes, records, timeline);
        let warmed = preloads
            .into_iter()
            .map(|(warmup_pct, region, alg, preload)| {
                let series = run.warmed(&preload);
                (warmup_pct, region, alg, preload.len() as u64, series)
            })
            .collect();
        (run.intervals, warmed)
    } else {
        let mut cold = MultiScheme::new(&sizes, o.readahead_bytes);
        cold.run(records, timeline);
        let warmed = preloads
            .into_iter()
            .map(|(warmup_pct, region, alg, preload)| {
                let mut s = MultiScheme::new(&sizes, o.readahead_bytes);
                s.preload(&preload);
                s.run(records, timeline);
                (warmup_pct, region, alg, preload.len() as u64, s.intervals)
            })
            .collect();
        (cold.intervals, warmed)
    };
    let mut out = Vec::new();
    for (k, &cache_pct) in view.cache_pcts.iter().enumerate() {
        let at = index[k];
        out.push(DaySeries {
            volume: v,
            day: d,
            cache_pct,
            intervals,
            always: Vec::new(),
            cold: fit(cold[at].clone()),
            warmed: warmed
                .iter()
                .map(|(w, r, a, n, s)| (*w, *r, *a, *n, fit(s[at].clone())))
                .collect(),
        });
    }
    out
}

/// Cases of every series at every threshold pair.
pub(super) fn cases(series: &[DaySeries], views: &[View], o: &Options) -> Vec<Case> {
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
                        volume: views[s.volume].name.clone(),
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
