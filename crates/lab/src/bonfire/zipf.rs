//! The Zipf experiment: warm-up on generated workloads of controlled skew.

use super::latency::{self, Timed, TimedInterval};
use super::*;

/// §6.1 and Figure 10.
#[derive(Clone, Debug)]
pub struct ZipfOptions {
    pub workload: Zipf,
    /// The new caches' size, % of the working set (the paper's 256 GB cache holds it all).
    pub cache_pct: f64,
    pub warmup_pcts: Vec<f64>,
    /// I/Os per interval; `None`: 1 % of the trace.
    pub interval_ios: Option<u64>,
    pub th_v: f64,
    pub th_n: f64,
    /// Table 4: the foreground speed that times the monitored half (the paper assumes an
    /// intense 1 Gbps), in bytes per second.
    pub foreground_bytes_per_s: f64,
    pub overhead: OverheadOptions,
    /// Figure 11: how reads are timed.
    pub latency: latency::LatencyOptions,
}

impl Default for ZipfOptions {
    fn default() -> ZipfOptions {
        ZipfOptions {
            workload: Zipf::bonfire(),
            cache_pct: 100.0,
            warmup_pcts: vec![25.0, 50.0, 75.0, 100.0],
            interval_ios: None,
            th_v: 0.9,
            th_n: 0.03,
            foreground_bytes_per_s: 125e6,
            overhead: OverheadOptions::default(),
            latency: latency::LatencyOptions::default(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ZipfSeries {
    /// "always-warm", "cold" or "bonfire N %".
    pub scheme: String,
    pub warmup_pct: Option<f64>,
    pub preload_blocks: u64,
    /// Read hit rate per interval from the half-way mark.
    pub hit_rates: Vec<Option<f64>>,
    /// Equation 1, in I/Os from the trace start (the paper's "I/O mark"); `None`: never
    /// converged within the run.
    pub converge_io: Option<u64>,
    pub final_hit_rate: Option<f64>,
    /// Over the second half.
    pub hit_rate: Option<f64>,
    /// Figure 11: mean read latency per interval from the half-way mark, ms.
    pub read_latency_ms: Vec<Option<f64>>,
    /// Mean read latency over the second half, ms.
    pub mean_read_latency_ms: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ZipfReport {
    pub requests: u64,
    pub alpha: f64,
    pub span_bytes: u64,
    pub working_set_blocks: u64,
    pub cache_blocks: u64,
    pub start_io: u64,
    pub interval_ios: u64,
    pub th_v: f64,
    pub th_n: f64,
    /// Figure 11: the data disk's model and the time of a cache hit.
    pub disk: String,
    pub hit_us: f64,
    pub series: Vec<ZipfSeries>,
    /// Table 4: monitoring the first half, pre-loading the largest warm-up.
    pub overhead: Overhead,
}

/// Generates the workload, creates the new caches half-way, and warms them with Last-K of
/// 4 KiB blocks from the first half (the prototype's log of recent blocks).
pub fn zipf(o: &ZipfOptions) -> Result<ZipfReport, String> {
    if o.workload.count < 2
        || o.cache_pct.is_nan()
        || o.cache_pct <= 0.0
        || o.warmup_pcts.iter().any(|p| p.is_nan() || *p <= 0.0)
    {
        return Err("the Zipf lab needs at least 2 requests and positive sizes".into());
    }
    if o.foreground_bytes_per_s.is_nan() || o.foreground_bytes_per_s <= 0.0 {
        return Err("the foreground speed must be positive".into());
    }
    if !(o.workload.alpha > 0.0 && o.workload.alpha <= 10.0) || o.workload.span_bytes < 4096 {
        return Err("Zipf needs 0 < α ≤ 10 and a span of at least 4 KiB".into());
    }
    let mut records: Vec<Record> = o.workload.records().collect();
    for (i, r) in records.iter_mut().enumerate() {
        r.time_ns = i as i64; // the axis is I/Os
    }
    let n = records.len() as u64;
    let start = n / 2;
    let interval = o.interval_ios.unwrap_or(n / 100).max(1);
    let wss = algorithms::working_set_blocks(&records);
    let capacity = ((wss as f64 * o.cache_pct / 100.0).round() as usize).max(1);
    let timeline = Timeline {
        start_ns: start as i64,
        interval_ns: interval as i64,
        readahead_bytes: 0,
    };
    let (first_half, second_half) = records.split_at(start as usize);
    // The schemes are independent: each runs on its own thread (the disk model makes them
    // costly), always-warm over the whole trace, the others from the half-way mark.
    type Run = (String, Option<f64>, u64, Vec<TimedInterval>);
    let mut jobs: Vec<(String, Option<f64>, Option<Vec<u64>>)> = vec![
        ("always-warm".into(), None, None),
        ("cold".into(), None, Some(Vec::new())),
    ];
    for &p in &o.warmup_pcts {
        let bytes = ((wss as f64 * p / 100.0).round() as u64) * BLOCK_BYTES;
        let preload = algorithms::select(first_half, Algorithm::LastK, BLOCK_BYTES, bytes, 0);
        jobs.push((format!("bonfire {p} %"), Some(p), Some(preload)));
    }
    let runs: Vec<Run> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .into_iter()
            .map(|(name, p, preload)| {
                let records = &records;
                scope.spawn(move || -> Result<Run, String> {
                    let mut s = Timed::new(Lru::new(capacity), &o.latency)?;
                    let blocks = preload.as_ref().map_or(0, |p| p.len() as u64);
                    match preload {
                        None => s.run(records.iter(), timeline)?,
                        Some(preload) => {
                            s.preload(preload);
                            s.run(second_half.iter(), timeline)?;
                        }
                    }
                    Ok((name, p, blocks, s.intervals))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a Zipf scheme panicked"))
            .collect::<Result<Vec<Run>, String>>()
    })?;
    let always: Vec<Interval> = runs[0].3.iter().map(|t| t.blocks).collect();
    let largest = o.warmup_pcts.iter().copied().fold(0.0, f64::max);
    let warmup = algorithms::select(
        first_half,
        Algorithm::LastK,
        BLOCK_BYTES,
        ((wss as f64 * largest / 100.0).round() as u64) * BLOCK_BYTES,
        0,
    );
    let half_bytes: u64 = first_half.iter().map(|r| r.length_bytes).sum();
    let overhead = bonfire_overheads::measure(
        &format!(
            "zipf, first half at {:.0} MB/s",
            o.foreground_bytes_per_s / 1e6
        ),
        first_half,
        half_bytes as f64 / o.foreground_bytes_per_s,
        &warmup,
        &o.overhead,
    )?;
    let len = always.len();
    let series = runs
        .into_iter()
        .map(|(name, p, blocks, mut timed)| {
            timed.resize(len, TimedInterval::default());
            summarize(name, p, blocks, &timed, &always, o, start, interval)
        })
        .collect();
    Ok(ZipfReport {
        requests: n,
        alpha: o.workload.alpha,
        span_bytes: o.workload.span_bytes,
        working_set_blocks: wss,
        cache_blocks: capacity as u64,
        start_io: start,
        interval_ios: interval,
        th_v: o.th_v,
        th_n: o.th_n,
        disk: o.latency.device.clone(),
        hit_us: o.latency.hit_ns as f64 / 1e3,
        series,
        overhead,
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) fn summarize(
    scheme: String,
    warmup_pct: Option<f64>,
    preload_blocks: u64,
    timed: &[TimedInterval],
    always: &[Interval],
    o: &ZipfOptions,
    start: u64,
    interval: u64,
) -> ZipfSeries {
    let s: Vec<Interval> = timed.iter().map(|t| t.blocks).collect();
    let t = schemes::convergence(&s, always, o.th_v, o.th_n);
    ZipfSeries {
        scheme,
        warmup_pct,
        preload_blocks,
        converge_io: t.map(|t| start + t as u64 * interval),
        final_hit_rate: s.iter().rev().find_map(|i| i.hit_rate()),
        hit_rate: schemes::server_load_reduction(&s, s.len()),
        hit_rates: s.iter().map(|i| i.hit_rate()).collect(),
        read_latency_ms: timed.iter().map(|t| t.mean_ms()).collect(),
        mean_read_latency_ms: latency::mean_read_ms(timed),
    }
}
