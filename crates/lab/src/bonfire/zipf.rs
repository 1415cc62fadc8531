//! The Zipf experiment: warm-up on generated workloads of controlled skew.

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
    let mut always = Scheme::new(Lru::new(capacity));
    always.run(&records, timeline);
    let mut runs: Vec<(String, Option<f64>, u64, Vec<Interval>)> = Vec::new();
    let mut cold = Scheme::new(Lru::new(capacity));
    cold.run(second_half, timeline);
    runs.push(("cold".into(), None, 0, cold.intervals));
    for &p in &o.warmup_pcts {
        let bytes = ((wss as f64 * p / 100.0).round() as u64) * BLOCK_BYTES;
        let preload = algorithms::select(first_half, Algorithm::LastK, BLOCK_BYTES, bytes, 0);
        let mut s = Scheme::new(Lru::new(capacity));
        s.preload(preload.iter().copied());
        s.run(second_half, timeline);
        runs.push((
            format!("bonfire {p} %"),
            Some(p),
            preload.len() as u64,
            s.intervals,
        ));
    }
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
    let len = always.intervals.len();
    let mut series = vec![summarize(
        "always-warm".into(),
        None,
        0,
        always.intervals.clone(),
        &always.intervals,
        o,
        start,
        interval,
    )];
    for (name, p, blocks, mut s) in runs {
        s.resize(len, Interval::default());
        series.push(summarize(
            name,
            p,
            blocks,
            s,
            &always.intervals,
            o,
            start,
            interval,
        ));
    }
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
        series,
        overhead,
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) fn summarize(
    scheme: String,
    warmup_pct: Option<f64>,
    preload_blocks: u64,
    s: Vec<Interval>,
    always: &[Interval],
    o: &ZipfOptions,
    start: u64,
    interval: u64,
) -> ZipfSeries {
    let t = schemes::convergence(&s, always, o.th_v, o.th_n);
    ZipfSeries {
        scheme,
        warmup_pct,
        preload_blocks,
        converge_io: t.map(|t| start + t as u64 * interval),
        final_hit_rate: s.iter().rev().find_map(|i| i.hit_rate()),
        hit_rate: schemes::server_load_reduction(&s, s.len()),
        hit_rates: s.iter().map(|i| i.hit_rate()).collect(),
    }
}
