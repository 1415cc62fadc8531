//! Bonfire §6.2 (Figures 12–15): a multi-day trace replayed from its first day, the new caches
//! created at the start of a later day (the paper's day 6), and the read hit rate and read
//! latency of *always-warm*, *cold* and Bonfire over the I/Os of that day and the day before.
//!
//! Per volume, as the prototype does: one cache runs from the trace start (always-warm); at T
//! (the new-cache day's start) an empty cache (cold) and one pre-loaded with Last-K of 4 KiB
//! blocks (the blocks the volume touched most recently before T, what Bonfire's log of buffer
//! cache I/O holds) take over. Reads are timed on a modelled data disk ([`latency`]).
//! Intervals are counted in I/Os (the paper's axis), `1 / intervals` of the volume's I/Os in the
//! two days each. The trace is streamed twice: first each volume's working set, day origin and
//! request counts, then the caches; memory is the working set's block set and the caches.

use rustc_hash::{FxHashMap, FxHashSet};

use super::latency::{self, LatencyOptions, Timed, TimedInterval};
use super::*;

#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// The new caches start at the start of this day, from 2 (the paper's: 6); a volume with
    /// fewer days has them at the start of its last day.
    pub new_cache_day: usize,
    pub day_ns: i64,
    pub day_start_hour: Option<u32>,
    /// Cache size, % of the volume's working set (the paper's 256 GB against proj1's 642 GB).
    pub cache_pct: f64,
    /// Warm-up size, % of the volume's working set.
    pub warmup_pct: f64,
    /// Intervals over the two days.
    pub intervals: usize,
    pub th_v: f64,
    pub th_n: f64,
    pub latency: LatencyOptions,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            new_cache_day: 6,
            day_ns: NS_PER_DAY,
            day_start_hour: None,
            cache_pct: 50.0,
            warmup_pct: 25.0,
            intervals: 100,
            th_v: 0.8,
            th_n: 0.03,
            latency: LatencyOptions::default(),
        }
    }
}

impl ReplayOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.new_cache_day < 2 {
            return Err("the new caches need a day before them (--replay-day 2 or later)".into());
        }
        if self.day_ns <= 0 || self.intervals == 0 || self.intervals > 100_000 {
            return Err("a day must be positive and the intervals 1 to 100000".into());
        }
        let pct = |p: f64| p.is_finite() && p > 0.0 && p <= 100.0;
        if !pct(self.cache_pct) || !pct(self.warmup_pct) || self.warmup_pct > self.cache_pct {
            return Err(format!(
                "the replay's cache ({} %) and warm-up ({} %) must be in (0, 100] % of the working set, the warm-up no larger than the cache",
                self.cache_pct, self.warmup_pct
            ));
        }
        if !(0.0..=1.0).contains(&self.th_v) || !(0.0..=1.0).contains(&self.th_n) {
            return Err("Th_V and Th_N must be in [0, 1]".into());
        }
        Ok(())
    }
}

/// One scheme over the two days.
#[derive(Clone, Debug, Serialize)]
pub struct ReplaySeries {
    /// "always-warm", "cold" or "bonfire".
    pub scheme: String,
    /// Read hit rate per interval, from the day before T (`None`: no reads, or before the
    /// scheme's cache existed).
    pub hit_rates: Vec<Option<f64>>,
    /// Mean read latency per interval, ms.
    pub read_latency_ms: Vec<Option<f64>>,
    /// Over the new-cache day.
    pub hit_rate: Option<f64>,
    pub mean_read_latency_ms: Option<f64>,
    /// Equation 1 against always-warm, in I/Os after T; `None`: never within the day.
    pub converge_after_ios: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReplayVolume {
    pub volume: String,
    /// The day the new caches start, from 1 (the one asked, or the volume's last).
    pub new_cache_day: usize,
    pub working_set_blocks: u64,
    pub cache_blocks: u64,
    pub preload_blocks: u64,
    /// I/Os of the day before T (T's place on the I/O axis).
    pub start_io: u64,
    /// I/Os of the two days.
    pub ios: u64,
    pub interval_ios: u64,
    pub series: Vec<ReplaySeries>,
    /// (cold − Bonfire) / cold T_converge, % (`None` when either never converged or cold
    /// converged at once).
    pub improvement_pct: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    pub source: String,
    pub new_cache_day: usize,
    pub day_s: f64,
    pub cache_pct: f64,
    pub warmup_pct: f64,
    pub th_v: f64,
    pub th_n: f64,
    pub disk: String,
    pub hit_us: f64,
    pub volumes: Vec<ReplayVolume>,
    /// Volumes not replayed, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// What pass 1 learns of a volume.
#[derive(Default)]
struct Learnt {
    first_ns: i64,
    last_ns: i64,
    blocks: FxHashSet<u64>,
    requests: usize,
}

/// One volume during pass 2.
struct Replaying {
    origin_ns: i64,
    /// The new-cache day, from 0.
    t_day: i64,
    wss: u64,
    /// The two days' I/Os so far.
    io: u64,
    start_io: u64,
    interval_ios: u64,
    always: Timed<Lru>,
    last_k: Lru,
    /// Cold and Bonfire, from T.
    new: Option<(Timed<Lru>, Timed<Lru>)>,
    preload_blocks: u64,
}

/// Runs the experiment on every volume with reads on the new-cache day.
pub fn replay_stream(
    source: &str,
    open: &mut Opener,
    o: &ReplayOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<ReplayReport, String> {
    o.validate()?;
    let (mut learnt, info, names, total) = learn(open, progress)?;
    let clock_origin = info.origin_unix_ns.unwrap_or(0);
    progress("replay, pass 2: the two days' I/Os");
    let (origins, t_days) = new_cache_days(&learnt, clock_origin, o);
    // Per volume: I/Os of the day before T, of T's day, and reads of T's day.
    let counts = day_counts(open, &origins, &t_days, o)?;
    let mut skipped = Vec::new();
    let mut state: Vec<Option<Replaying>> = Vec::new();
    for (i, v) in learnt.iter_mut().enumerate() {
        let name = names.name(VolumeId(i as u32)).to_owned();
        let (before, on_day, reads) = counts.get(&i).copied().unwrap_or_default();
        let wss = v.blocks.len() as u64;
        v.blocks = FxHashSet::default();
        if v.requests == 0 {
            state.push(None);
            continue;
        }
        if let Some(why) = skip_reason(t_days[i], on_day, reads) {
            skipped.push((name, why));
            state.push(None);
            continue;
        }
        let blocks = |pct: f64| ((wss as f64 * pct / 100.0).round() as usize).max(1);
        let ios = before + on_day;
        state.push(Some(Replaying {
            origin_ns: origins[i],
            t_day: t_days[i],
            wss,
            io: 0,
            start_io: before,
            interval_ios: ios.div_ceil(o.intervals as u64).max(1),
            always: Timed::new(Lru::new(blocks(o.cache_pct)), &o.latency)?,
            last_k: Lru::new(blocks(o.warmup_pct)),
            new: None,
            preload_blocks: 0,
        }));
    }
    progress(&format!(
        "replay, pass 3: {} volume(s), new caches at day {}",
        state.iter().flatten().count(),
        o.new_cache_day
    ));
    let mut reader = open()?;
    let mut seen = 0u64;
    while let Some(r) = reader.next_record().map_err(|e| e.to_string())? {
        seen += 1;
        if seen.is_multiple_of(1 << 22) {
            progress(&format!(
                "replay, pass 3: {:.0} % of {} requests",
                seen as f64 * 100.0 / total as f64,
                total
            ));
        }
        let Some(v) = state.get_mut(r.volume.index()).and_then(|s| s.as_mut()) else {
            continue;
        };
        let day = (r.time_ns - v.origin_ns).div_euclid(o.day_ns);
        let t_day = v.t_day;
        if day > t_day {
            continue;
        }
        if day < t_day - 1 {
            v.always.access(&r, None)?;
            for b in block_range(r.offset_bytes, r.length_bytes) {
                v.last_k.access(b);
            }
            continue;
        }
        if day == t_day && v.new.is_none() {
            let cold = Timed::new(Lru::new(v.always.cache.capacity()), &o.latency)?;
            let mut bonfire = Timed::new(Lru::new(v.always.cache.capacity()), &o.latency)?;
            let mut k = v.last_k.recency_order();
            k.reverse(); // oldest first, the most recent last
            v.preload_blocks = k.len() as u64;
            bonfire.preload(k);
            v.new = Some((cold, bonfire));
            v.start_io = v.io;
        }
        let i = (v.io / v.interval_ios) as usize;
        v.io += 1;
        v.always.access(&r, Some(i))?;
        match &mut v.new {
            None => {
                for b in block_range(r.offset_bytes, r.length_bytes) {
                    v.last_k.access(b);
                }
            }
            Some((cold, bonfire)) => {
                cold.access(&r, Some(i))?;
                bonfire.access(&r, Some(i))?;
            }
        }
    }
    drop(reader);
    let mut volumes = Vec::new();
    for (i, s) in state.into_iter().enumerate() {
        let Some(mut v) = s else { continue };
        let name = names.name(VolumeId(i as u32)).to_owned();
        match v.new.take() {
            None => skipped.push((name, format!("no requests on day {}", v.t_day + 1))),
            Some(new) => volumes.push(replay_volume(name, v, new, o)),
        }
    }
    if volumes.is_empty() {
        return Err(format!(
            "no volume could be replayed (the new caches start on day {} or a volume's last): {}",
            o.new_cache_day,
            skipped
                .iter()
                .map(|(v, why)| format!("{v}: {why}"))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    Ok(ReplayReport {
        source: source.to_owned(),
        new_cache_day: o.new_cache_day,
        day_s: o.day_ns as f64 / NS_PER_S as f64,
        cache_pct: o.cache_pct,
        warmup_pct: o.warmup_pct,
        th_v: o.th_v,
        th_n: o.th_n,
        disk: o.latency.device.clone(),
        hit_us: o.latency.hit_ns as f64 / 1e3,
        volumes,
        skipped,
    })
}

/// Pass 1: each volume's span, requests and blocks; the trace's information and volumes; the
/// requests in all. A trace with no request, or no timestamps, is refused.
fn learn(
    open: &mut Opener,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(Vec<Learnt>, TraceInfo, VolumeTable, u64), String> {
    progress("replay, pass 1: each volume's working set and days");
    let mut reader = open()?;
    let mut learnt: Vec<Learnt> = Vec::new();
    let mut total = 0u64;
    while let Some(r) = reader.next_record().map_err(|e| e.to_string())? {
        total += 1;
        let i = r.volume.index();
        if learnt.len() <= i {
            learnt.resize_with(i + 1, Learnt::default);
        }
        let v = &mut learnt[i];
        if v.requests == 0 {
            (v.first_ns, v.last_ns) = (r.time_ns, r.time_ns);
        }
        v.first_ns = v.first_ns.min(r.time_ns);
        v.last_ns = v.last_ns.max(r.time_ns);
        v.requests += 1;
        v.blocks.extend(block_range(r.offset_bytes, r.length_bytes));
    }
    let info = reader.info().clone();
    let names = reader.volumes().clone();
    drop(reader);
    if total == 0 {
        return Err("the trace has no requests".into());
    }
    if !info.has_time {
        return Err("the trace has no timestamps, so it cannot be split into days".into());
    }
    Ok((learnt, info, names, total))
}

/// One volume's replay as reported: always-warm, cold and Bonfire per interval, their hit
/// rates, read latencies and convergence from the new cache's start (`new`: the cold and
/// Bonfire caches' timelines).
fn replay_volume(
    name: String,
    v: Replaying,
    (cold, bonfire): (Timed<Lru>, Timed<Lru>),
    o: &ReplayOptions,
) -> ReplayVolume {
    let n = (v.io.div_ceil(v.interval_ios)) as usize;
    let first = (v.start_io / v.interval_ios) as usize;
    let pad = |mut t: Vec<TimedInterval>| {
        t.resize(n.max(t.len()), TimedInterval::default());
        t
    };
    let always = pad(v.always.intervals);
    let counts = |t: &[TimedInterval]| t.iter().map(|t| t.blocks).collect::<Vec<Interval>>();
    let always_after = counts(&always[first..]);
    let mut series = Vec::new();
    for (scheme, t, is_new) in [
        ("always-warm", always.clone(), false),
        ("cold", pad(cold.intervals), true),
        ("bonfire", pad(bonfire.intervals), true),
    ] {
        let after = &t[first..];
        let after_counts = counts(after);
        let converge = is_new
            .then(|| schemes::convergence(&after_counts, &always_after, o.th_v, o.th_n))
            .flatten();
        // The interval holding T is shared with the day before; T_converge counts from T.
        let converge_after_ios =
            converge.map(|k| ((first + k) as u64 * v.interval_ios).saturating_sub(v.start_io));
        // Cold and Bonfire have no figure before their caches existed.
        let per_interval = |f: fn(&TimedInterval) -> Option<f64>| -> Vec<Option<f64>> {
            t.iter()
                .enumerate()
                .map(|(k, x)| if is_new && k < first { None } else { f(x) })
                .collect()
        };
        series.push(ReplaySeries {
            scheme: scheme.into(),
            hit_rates: per_interval(|x| x.blocks.hit_rate()),
            read_latency_ms: per_interval(TimedInterval::mean_ms),
            hit_rate: schemes::server_load_reduction(&after_counts, after_counts.len()),
            mean_read_latency_ms: latency::mean_read_ms(after),
            converge_after_ios: if is_new { converge_after_ios } else { Some(0) },
        });
    }
    let improvement_pct = match (series[1].converge_after_ios, series[2].converge_after_ios) {
        (Some(c), Some(b)) if c > 0 => Some((c as f64 - b as f64) / c as f64 * 100.0),
        _ => None,
    };
    ReplayVolume {
        volume: name,
        new_cache_day: v.t_day as usize + 1,
        working_set_blocks: v.wss,
        cache_blocks: v.always.cache.capacity() as u64,
        preload_blocks: v.preload_blocks,
        start_io: v.start_io,
        ios: v.io,
        interval_ios: v.interval_ios,
        series,
        improvement_pct,
    }
}

/// Each volume's day origin, and its new-cache day from 0: the one asked, or its last.
fn new_cache_days(learnt: &[Learnt], clock_origin: i64, o: &ReplayOptions) -> (Vec<i64>, Vec<i64>) {
    let origins: Vec<i64> = learnt
        .iter()
        .map(|v| origin(v.first_ns, clock_origin, o.day_start_hour, o.day_ns))
        .collect();
    let t_days: Vec<i64> = learnt
        .iter()
        .zip(&origins)
        .map(|(v, &origin_ns)| {
            let last = (v.last_ns - origin_ns).div_euclid(o.day_ns);
            (o.new_cache_day as i64 - 1).min(last)
        })
        .collect();
    (origins, t_days)
}

/// Pass 2: per volume, its I/Os of the day before its new-cache day, of that day, and that
/// day's reads.
fn day_counts(
    open: &mut Opener,
    origins: &[i64],
    t_days: &[i64],
    o: &ReplayOptions,
) -> Result<FxHashMap<usize, (u64, u64, u64)>, String> {
    let mut counts: FxHashMap<usize, (u64, u64, u64)> = FxHashMap::default();
    let mut reader = open()?;
    while let Some(r) = reader.next_record().map_err(|e| e.to_string())? {
        let i = r.volume.index();
        let day = (r.time_ns - origins[i]).div_euclid(o.day_ns);
        let t_day = t_days[i];
        let c = counts.entry(i).or_default();
        if day == t_day - 1 {
            c.0 += 1;
        } else if day == t_day {
            c.1 += 1;
            if r.op == Op::Read {
                c.2 += 1;
            }
        }
    }
    drop(reader);
    Ok(counts)
}

/// Why a volume with requests is not replayed: fewer than two days, or no request (or no
/// read) on its new-cache day `t_day` (from 0).
fn skip_reason(t_day: i64, on_day: u64, reads: u64) -> Option<String> {
    if t_day < 1 {
        Some("shorter than two days".to_owned())
    } else if on_day == 0 {
        Some(format!("no requests on day {}", t_day + 1))
    } else if reads == 0 {
        Some(format!(
            "no reads on day {}: read hit rates are undefined",
            t_day + 1
        ))
    } else {
        None
    }
}
