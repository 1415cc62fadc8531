//! Narrow vs wide striping (Goyal, Radkov, Shenoy) on the simulator: the pool of
//! `cordillera_striping`, every disk a calibrated Fujitsu MAJ3182MC, RAID-5 4+p arrays.
//!
//! Figure 2: the ratio of mean response times, wide over narrow, against the number of arrays —
//! (a) one store per array (large or small requests), (b) an anti-correlated pair of a large
//! and a small store per array. Each store is 75 % busy while ON (§3.2.1: "70–80 %").
//!
//! Figure 2(a) runs twice: with ON periods independent across arrays, and synchronized across
//! arrays (every array loaded alike at each moment, the paper's "identical mean load"). The
//! paper's "within 10 %" is what the synchronized run shows; independent ON periods let wide
//! striping spread one array's burst over idle arrays.
//!
//! Modules: [`sim`], the pool's requests on simulated arrays; [`experiment`], the paper's
//! scenarios (§3.2–3.4); [`model`], the modelling choices the paper leaves open (disk queue,
//! the utilization's meaning, store size, request sizes), each a switch; [`skew`], Figures 8–10 on skewed and real traces (§3.5); [`table3`],
//! the sequential reader beside a random one (Table 3); [`seeds`], all of them over seeds and
//! their spread (`lab striping`).

#[cfg(test)]
mod directions;
pub mod experiment;
pub mod fragments;
pub mod model;
pub mod seeds;
pub mod sim;
pub mod skew;
pub mod streams;
pub mod table3;

use serde::Serialize;

use cordillera_striping::policy::Policy;
use experiment::{Scenario, StreamKind};

use crate::spread::Figure;

#[derive(Clone, Debug)]
pub struct Options {
    /// Array counts (the paper: 1 to 25).
    pub arrays: Vec<usize>,
    /// Simulated seconds per run.
    pub duration_s: f64,
    /// Utilization of a store's array while it is ON.
    pub utilization: f64,
    pub mean_on_s: f64,
    pub figures: Vec<Fig>,
    /// Wide stores rotate arrays every stripe unit (`false`) or every whole RAID stripe.
    pub wide_whole_stripes: bool,
    /// Figures 2–7's modelling choices.
    pub model: model::Model,
}

impl Options {
    /// Whether the options make a run (`table2`: Figures 8 and 10, if asked for, on generated
    /// streams rather than a trace's); the flag at fault when not.
    pub fn check(&self, table2: bool) -> Result<(), String> {
        // ON periods shape generated streams only: a trace's volumes have none.
        let generated = table2 || !self.figures.is_empty();
        if self.arrays.is_empty() || self.arrays.iter().any(|&n| n == 0 || n > 64) {
            return Err("--arrays: 1 to 64 arrays each".into());
        }
        if !(self.duration_s >= 10.0 && self.duration_s <= 1e6) {
            return Err("--duration-s must be 10 to 10^6".into());
        }
        if !(self.utilization > 0.0 && self.utilization < 1.0) {
            return Err("--utilization must be between 0 and 1".into());
        }
        if generated && !(self.mean_on_s > 0.0 && self.mean_on_s * 2.0 <= self.duration_s) {
            return Err("--mean-on-s must be positive and at most half of --duration-s".into());
        }
        if self.model.store_bytes.is_some_and(|b| b < 64 << 20) {
            return Err("--store-mib must be at least 64".into());
        }
        Ok(())
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            arrays: vec![1, 2, 4, 8, 16, 25],
            duration_s: 600.0,
            utilization: 0.75,
            mean_on_s: 10.0,
            figures: vec![Fig::F2a, Fig::F2b],
            wide_whole_stripes: false,
            model: model::Model::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Fig {
    F2a,
    F2b,
    /// Stripe unit: large 128 KB → 1 MB with small 8 → 32 KB.
    F3,
    /// Utilization: large requests' ON inter-arrival 30 → 100 ms (small at 10 ms), then the
    /// small ones' 7 → 15 ms (large at 50 ms).
    F4,
    /// Request size: large 64 KB → 2 MB (small 64 KB), inter-arrivals 40 and 7 ms, stripe
    /// unit half the mean.
    F5,
    /// Write fraction 10 → 90 %.
    F6,
    /// Correlation of each array's pair −1 → +1, with streams of different arrays independent
    /// and then synchronized.
    F7,
}

/// What `lab striping --figures` names: a simulated figure of §3.2–3.3, the trace-driven
/// Figures 8–9 and 10 of §3.4, or Table 3 of §3.5.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Sim(Fig),
    /// Figures 8 and 9: the streams on 4 arrays, per-stream mean and p95, per-array
    /// utilization CDF.
    F8,
    /// Figure 10: as 8, with array 2's two busiest streams stopped after a tenth of the run.
    F10,
    /// Table 3: an OLTP-like store beside a sequential reader on two RAID-5 7+p arrays.
    Table3,
}

impl Part {
    pub const ALL: [(&'static str, Part); 10] = [
        ("2a", Part::Sim(Fig::F2a)),
        ("2b", Part::Sim(Fig::F2b)),
        ("3", Part::Sim(Fig::F3)),
        ("4", Part::Sim(Fig::F4)),
        ("5", Part::Sim(Fig::F5)),
        ("6", Part::Sim(Fig::F6)),
        ("7", Part::Sim(Fig::F7)),
        ("8", Part::F8),
        ("10", Part::F10),
        ("table3", Part::Table3),
    ];

    /// The simulated figures among `parts`, in their order.
    pub fn figures(parts: &[Part]) -> Vec<Fig> {
        parts
            .iter()
            .filter_map(|p| match p {
                Part::Sim(f) => Some(*f),
                _ => None,
            })
            .collect()
    }
}

impl std::str::FromStr for Part {
    type Err = String;
    fn from_str(s: &str) -> Result<Part, String> {
        Part::ALL
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                let names: Vec<&str> = Part::ALL.iter().map(|(n, _)| *n).collect();
                format!("no figure {s:?} (one of {})", names.join(", "))
            })
    }
}

/// One point of a figure: wide over narrow for one kind of store at one array count (and one
/// value `x` of the figure's parameter).
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub figure: &'static str,
    pub series: String,
    pub arrays: usize,
    /// The figure's parameter (its unit in `x_label`); none for Figure 2.
    pub x: Option<f64>,
    pub x_label: &'static str,
    /// Mean utilization of the disks over the narrow run.
    pub narrow_utilization: f64,
    pub narrow_ms: f64,
    pub wide_ms: f64,
    pub ratio: f64,
    /// ON rate found by the solver, requests per second.
    pub rate_on_per_s: f64,
}

fn kinds(names: &[&str]) -> Vec<StreamKind> {
    names
        .iter()
        .map(|n| match *n {
            "large" => StreamKind::large(10.0),
            _ => StreamKind::small(100.0),
        })
        .collect()
}

/// Figure 6's utilization while ON with reads only, before writes are added.
pub const FIGURE_6_READ_UTILIZATION: f64 = 0.3;

/// How a scenario's rates are set before it runs.
enum Rates {
    /// Solved for the options' utilization while ON.
    Solve,
    /// As given (inter-arrival times fixed by the figure).
    Fixed,
}

/// Runs one scenario narrow and wide; a point per kind.
fn compare(
    figure: &'static str,
    series: &str,
    x: Option<(f64, &'static str)>,
    mut s: Scenario,
    rates: Rates,
    o: &Options,
) -> Result<Vec<Point>, String> {
    s.duration_s = o.duration_s;
    s.mean_on_s = o.mean_on_s;
    s.model = o.model.clone();
    if o.wide_whole_stripes {
        s.wide_chunk_units = s.array.data_disks() as u64;
    }
    if let Rates::Solve = rates {
        s.solve_rates(o.utilization)?;
    }
    let narrow_report = s.run(Policy::Narrow)?;
    let narrow = s.means_ms(&narrow_report);
    let utilization = narrow_report.array_mean_utilization.iter().sum::<f64>()
        / narrow_report.array_mean_utilization.len() as f64;
    let wide = s.means_ms(&s.run(Policy::Wide)?);
    Ok(s.kinds
        .iter()
        .enumerate()
        .map(|(k, kind)| Point {
            figure,
            series: if s.kinds.len() > 1 {
                format!("{series} {}", kind.name)
            } else {
                series.to_string()
            },
            arrays: s.arrays,
            x: x.map(|x| x.0),
            x_label: x.map_or("", |x| x.1),
            narrow_utilization: utilization,
            narrow_ms: narrow[k],
            wide_ms: wide[k],
            ratio: wide[k] / narrow[k],
            rate_on_per_s: kind.rate_on_per_s,
        })
        .collect())
}

/// Every point of the chosen figures for one seed; `progress` hears of each point done.
pub fn run(o: &Options, seed: u64, progress: &mut dyn FnMut(&Point)) -> Result<Vec<Point>, String> {
    let mut points = Vec::new();
    for &n in &o.arrays {
        if o.figures.contains(&Fig::F2a) {
            for kind in ["large", "small"] {
                for (series, cross) in [("independent", 0.0), ("synchronized", 1.0)] {
                    let mut s = Scenario::paper(n, kinds(&[kind]), seed);
                    s.cross_correlation = cross;
                    for p in compare("2a", &format!("{kind}, {series}"), None, s, Rates::Solve, o)?
                    {
                        progress(&p);
                        points.push(p);
                    }
                }
            }
        }
        if o.figures.contains(&Fig::F2b) {
            let s = Scenario::paper(n, kinds(&["large", "small"]), seed);
            for p in compare("2b", "pair", None, s, Rates::Solve, o)? {
                progress(&p);
                points.push(p);
            }
        }
        let pair = || Scenario::paper(n, kinds(&["large", "small"]), seed);
        let mut add = |points: &mut Vec<Point>, ps: Vec<Point>| {
            for p in ps {
                progress(&p);
                points.push(p);
            }
        };
        if o.figures.contains(&Fig::F3) {
            // "All other parameters are same as the previous experiment": the rates of Figure
            // 2(b)'s stripe units (1 MB and 32 KB), kept as the units change.
            let mut base = pair();
            base.duration_s = o.duration_s;
            base.mean_on_s = o.mean_on_s;
            base.model = o.model.clone();
            base.solve_rates(o.utilization)?;
            for (large_kb, small_kb) in [(128u64, 8u64), (256, 16), (512, 24), (1024, 32)] {
                let mut s = base.clone();
                s.kinds[0].stripe_unit_bytes = large_kb << 10;
                s.kinds[1].stripe_unit_bytes = small_kb << 10;
                let x = Some((
                    large_kb as f64,
                    "large stripe unit, KB (small: 8, 16, 24, 32 KB)",
                ));
                add(&mut points, compare("3", "pair", x, s, Rates::Fixed, o)?);
            }
        }
        if o.figures.contains(&Fig::F4) {
            for large_ms in [30.0, 50.0, 70.0, 100.0] {
                let mut s = pair();
                s.kinds[0].rate_on_per_s = 1e3 / large_ms;
                s.kinds[1].rate_on_per_s = 1e3 / 10.0;
                let x = Some((large_ms, "large ON inter-arrival, ms (small: 10 ms)"));
                add(&mut points, compare("4a", "pair", x, s, Rates::Fixed, o)?);
            }
            // 4 and 5 ms go past the paper's axis (7–15 ms) to its stated 60 % utilization:
            // our arrays are 40 % busy at 7 ms.
            for small_ms in [4.0, 5.0, 7.0, 10.0, 15.0] {
                let mut s = pair();
                s.kinds[0].rate_on_per_s = 1e3 / 50.0;
                s.kinds[1].rate_on_per_s = 1e3 / small_ms;
                let x = Some((small_ms, "small ON inter-arrival, ms (large: 50 ms)"));
                add(&mut points, compare("4b", "pair", x, s, Rates::Fixed, o)?);
            }
        }
        if o.figures.contains(&Fig::F5) {
            for ratio in [1u64, 2, 4, 8, 16, 32] {
                let mut s = pair();
                let mean = (64u64 << 10) * ratio;
                s.kinds[0].mean_request_bytes = mean as f64;
                s.kinds[0].stripe_unit_bytes = mean / 2;
                s.kinds[0].rate_on_per_s = 1e3 / 40.0;
                s.kinds[1].rate_on_per_s = 1e3 / 7.0;
                let x = Some((ratio as f64, "large/small request size (small 64 KB)"));
                add(&mut points, compare("5", "pair", x, s, Rates::Fixed, o)?);
            }
        }
        if o.figures.contains(&Fig::F6) {
            // Rates that keep the disks 30 % busy while ON with reads only, then writes at
            // those rates: RAID-5 small writes cost up to four I/Os, so at the figure's
            // utilization (75 %) most write fractions would overload the arrays and measure
            // only their queues.
            let mut base = pair();
            base.duration_s = o.duration_s;
            base.mean_on_s = o.mean_on_s;
            base.model = o.model.clone();
            base.solve_rates(FIGURE_6_READ_UTILIZATION)?;
            for pct in [10u32, 30, 50, 70, 90] {
                let mut s = base.clone();
                for k in &mut s.kinds {
                    k.read_fraction = 1.0 - pct as f64 / 100.0;
                }
                let x = Some((pct as f64, "writes, % of requests"));
                add(&mut points, compare("6", "pair", x, s, Rates::Fixed, o)?);
            }
        }
        if o.figures.contains(&Fig::F7) {
            for (series, cross) in [("independent arrays", 0.0), ("synchronized arrays", 1.0)] {
                for c in [-1.0, -0.5, 0.0, 0.5, 1.0] {
                    let mut s = pair();
                    s.pair_correlation = c;
                    s.cross_correlation = cross;
                    let x = Some((c, "correlation of L_i and S_i"));
                    add(&mut points, compare("7", series, x, s, Rates::Solve, o)?);
                }
            }
        }
    }
    Ok(points)
}

/// The paper's statement for a point's series, as the paper states it.
fn paper(p: &Point) -> &'static str {
    let large = p.series.starts_with("large") || p.series.ends_with("large");
    match (p.figure, large) {
        ("2a", true) => "within 10 %, wide better for large requests",
        ("2a", false) => "within 10 %, narrow better for small requests",
        ("2b", true) => "wide 15–20 % better (0.80–0.85)",
        ("2b", false) => "wide 30–42 % worse (1.30–1.42)",
        ("3", true) => "narrow wins at 128 KB, wide at 1 MB",
        ("3", false) => "wide wins at small units, narrow at large",
        ("4a" | "4b", _) => "wide gains as utilization rises (shorter inter-arrivals)",
        ("5", true) => "interference first, then parallelism: wide gains as requests grow",
        ("5", false) => "parallelism first, then interference: wide loses as large requests grow",
        ("6", _) => "more writes favour wide",
        ("7", true) => "large: narrow worse whatever the correlation",
        ("7", false) => "small: narrow better only under strong anti-correlation",
        _ => "",
    }
}

/// Headline figures of one run, for the spread over seeds.
pub fn figures(points: &[Point]) -> Vec<Figure> {
    points
        .iter()
        .map(|p| {
            let x = p.x.map_or(String::new(), |x| format!("/{x}"));
            let at = p.x.map_or(String::new(), |x| format!(", x = {x}"));
            Figure::new(
                format!("fig{}/{}/{}{x}", p.figure, p.series, p.arrays),
                format!(
                    "Fig {} {}, {} arrays{at}: wide/narrow",
                    p.figure, p.series, p.arrays
                ),
                "ratio",
                p.ratio,
                paper(p),
            )
        })
        .collect()
}

/// Figures 8–9 (and 10 with `stop`): one seed of §3.4's trace-driven experiment.
#[derive(Clone, Debug, Serialize)]
pub struct SkewReport {
    pub figure: &'static str,
    pub source: String,
    pub duration_s: f64,
    pub streams: Vec<StreamRow>,
    pub dropped: Vec<String>,
    /// The greedy partition's (max − min) / mean of the arrays' mean loads.
    pub imbalance: f64,
    pub partition_tries: u32,
    pub utilization_cdf: Vec<UtilizationCdf>,
    /// Streams whose wide mean (p95) is at most 1.1 × their narrow one.
    pub comparable_or_better_mean: f64,
    pub comparable_or_better_p95: f64,
    /// Geometric mean over streams of wide / narrow.
    pub geomean_ratio_mean: f64,
    pub geomean_ratio_p95: f64,
    /// Figure 10: wide / narrow mean of each narrow array's streams (the stopped ones left out).
    pub array_ratios: Vec<Option<f64>>,
    pub stop: Option<StopReport>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StreamRow {
    pub name: String,
    pub array: usize,
    pub requests: u64,
    pub weighted_iops: f64,
    pub narrow_mean_ms: Option<f64>,
    pub narrow_p95_ms: Option<f64>,
    pub wide_mean_ms: Option<f64>,
    pub wide_p95_ms: Option<f64>,
}

/// One array's utilization over the run's intervals, as quantiles 0, 0.1, …, 1.
#[derive(Clone, Debug, Serialize)]
pub struct UtilizationCdf {
    pub policy: &'static str,
    pub array: usize,
    pub mean: f64,
    pub quantiles: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StopReport {
    pub at_s: f64,
    pub array: usize,
    pub streams: Vec<String>,
    /// The stopped array's mean utilization after the stop, narrow and wide.
    pub narrow_utilization_after: f64,
    pub wide_utilization_after: f64,
}

pub const CDF_QUANTILES: [f64; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// §3.4 on `source` (Figures 8–9), or with two streams of array 2 stopped after a tenth of
/// the run (Figure 10); on the paper's arrays, or on arrays of `device`.
pub fn run_skew(
    source: &skew::Source,
    duration_s: f64,
    wide_whole_stripes: bool,
    seed: u64,
    figure_10: bool,
    device: Option<&crate::devices::DeviceSpec>,
) -> Result<SkewReport, String> {
    let mut o = skew::SkewOptions::paper(duration_s, seed);
    if let Some(d) = device {
        o = o.on_device(d)?;
    }
    if wide_whole_stripes {
        o.wide_chunk_units = o.array.data_disks() as u64;
    }
    if figure_10 {
        o.stop = Some(skew::Stop {
            at_s: duration_s / 10.0,
            array: 1,
            streams: 2,
        });
    }
    run_skew_with(source, &o)
}

/// §3.4's experiment on `source` with any options (arrays, stripe unit, a stop).
pub fn run_skew_with(source: &skew::Source, o: &skew::SkewOptions) -> Result<SkewReport, String> {
    let duration_s = o.duration_s;
    let figure_10 = o.stop.is_some();
    let r = skew::run(source, o)?;
    let streams: Vec<StreamRow> = r
        .streams
        .iter()
        .enumerate()
        .map(|(i, s)| StreamRow {
            name: s.name.clone(),
            array: s.array,
            requests: s.requests,
            weighted_iops: s.weighted_iops,
            narrow_mean_ms: r.narrow.volumes[i].mean_ms(),
            narrow_p95_ms: r.narrow.volumes[i].p95_ms(),
            wide_mean_ms: r.wide.volumes[i].mean_ms(),
            wide_p95_ms: r.wide.volumes[i].p95_ms(),
        })
        .collect();
    type Pick = dyn Fn(&StreamRow) -> (Option<f64>, Option<f64>);
    let ratios = |f: &Pick| -> Vec<f64> {
        streams
            .iter()
            .enumerate()
            .filter(|(i, _)| !r.stopped.contains(i))
            .filter_map(|(_, s)| match f(s) {
                (Some(w), Some(n)) if n > 0.0 => Some(w / n),
                _ => None,
            })
            .collect()
    };
    let mean_ratios = ratios(&|s| (s.wide_mean_ms, s.narrow_mean_ms));
    let p95_ratios = ratios(&|s| (s.wide_p95_ms, s.narrow_p95_ms));
    let share = |v: &[f64]| v.iter().filter(|x| **x <= 1.1).count() as f64 / v.len().max(1) as f64;
    let geomean = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp();
    let mut utilization_cdf = Vec::new();
    for (policy, report) in [("narrow", &r.narrow), ("wide", &r.wide)] {
        for (a, series) in report.array_utilization.iter().enumerate() {
            utilization_cdf.push(UtilizationCdf {
                policy,
                array: a,
                mean: report.array_mean_utilization[a],
                quantiles: skew::quantiles(series, &CDF_QUANTILES),
            });
        }
    }
    let stop = o.stop.map(|s| {
        let after = |report: &sim::RunReport| {
            let skip = (s.at_s / report.interval_s).ceil() as usize;
            let tail = &report.array_utilization[s.array];
            let tail = &tail[skip.min(tail.len())..];
            tail.iter().sum::<f64>() / tail.len().max(1) as f64
        };
        StopReport {
            at_s: s.at_s,
            array: s.array,
            streams: r
                .stopped
                .iter()
                .map(|i| r.streams[*i].name.clone())
                .collect(),
            narrow_utilization_after: after(&r.narrow),
            wide_utilization_after: after(&r.wide),
        }
    });
    Ok(SkewReport {
        figure: if figure_10 { "10" } else { "8-9" },
        source: source.description.clone(),
        duration_s,
        dropped: r.dropped.iter().map(|s| s.name.clone()).collect(),
        imbalance: r.partition.imbalance,
        partition_tries: r.partition.tries,
        comparable_or_better_mean: share(&mean_ratios),
        comparable_or_better_p95: share(&p95_ratios),
        geomean_ratio_mean: geomean(&mean_ratios),
        geomean_ratio_p95: geomean(&p95_ratios),
        array_ratios: r.array_ratios(),
        streams,
        utilization_cdf,
        stop,
    })
}

/// Headline figures of a skew report, for the spread over seeds.
pub fn skew_figures(r: &SkewReport) -> Vec<Figure> {
    let mut out = Vec::new();
    if r.figure == "8-9" {
        out.push(Figure::new(
            "fig8/comparable_or_better_mean",
            "Fig 8(a): streams with wide mean ≤ 1.1 × narrow",
            "fraction",
            r.comparable_or_better_mean,
            "wide comparable to or better for most streams",
        ));
        out.push(Figure::new(
            "fig8/comparable_or_better_p95",
            "Fig 8(b): streams with wide p95 ≤ 1.1 × narrow",
            "fraction",
            r.comparable_or_better_p95,
            "improvement larger at the 95th percentile",
        ));
        out.push(Figure::new(
            "fig8/geomean_mean",
            "Fig 8(a): geometric mean over streams of wide/narrow mean",
            "ratio",
            r.geomean_ratio_mean,
            "",
        ));
        out.push(Figure::new(
            "fig8/geomean_p95",
            "Fig 8(b): geometric mean over streams of wide/narrow p95",
            "ratio",
            r.geomean_ratio_p95,
            "",
        ));
        for policy in ["narrow", "wide"] {
            let p90: Vec<f64> = r
                .utilization_cdf
                .iter()
                .filter(|c| c.policy == policy)
                .map(|c| c.quantiles[9])
                .collect();
            let spread = p90.iter().copied().fold(f64::MIN, f64::max)
                - p90.iter().copied().fold(f64::MAX, f64::min);
            out.push(Figure::new(
                format!("fig9/{policy}/p90_spread"),
                format!(
                    "Fig 9: {policy}, max − min over arrays of the 90th-percentile utilization"
                ),
                "utilization",
                spread,
                if policy == "wide" {
                    "all four arrays equally balanced"
                } else {
                    "distributions significantly different"
                },
            ));
        }
    } else {
        for (a, ratio) in r.array_ratios.iter().enumerate() {
            if let Some(ratio) = ratio {
                out.push(Figure::new(
                    format!("fig10/array{}", a + 1),
                    format!("Fig 10: array {}'s streams, wide/narrow mean", a + 1),
                    "ratio",
                    *ratio,
                    if Some(a) == r.stop.as_ref().map(|s| s.array) {
                        "narrow better on the quiet array (> 1)"
                    } else {
                        "wide comparable or better (≤ 1)"
                    },
                ));
            }
        }
        if let Some(s) = &r.stop {
            out.push(Figure::new(
                "fig10/quiet_array_utilization",
                format!("Fig 10: array {} after the stop, narrow", s.array + 1),
                "utilization",
                s.narrow_utilization_after,
                "< 10 %",
            ));
        }
    }
    out
}

/// Table 3 in simulation, both request sizes and both policies, the adapter's path to each
/// array limited to `channel_mb_per_s` (none: unlimited).
pub fn run_table3(
    duration_s: f64,
    seed: u64,
    channel_mb_per_s: Option<f64>,
) -> Result<Vec<table3::Table3Result>, String> {
    let mut out = Vec::new();
    for bytes in [896u64 << 10, 7 << 20] {
        let mut t = table3::Table3::paper(bytes, duration_s, seed);
        t.channel_mb_per_s = channel_mb_per_s;
        out.push(table3::run(&t, Policy::Narrow)?);
        out.push(table3::run(&t, Policy::Wide)?);
    }
    Ok(out)
}

/// The paper's Table 3, as stated: (size, policy, sequential MB/s, tpmC).
pub const PAPER_TABLE_3: [(&str, &str, f64, f64); 4] = [
    ("896 KB", "narrow", 25.43, 267.0),
    ("896 KB", "wide", 20.09, 356.0),
    ("7 MB", "narrow", 29.45, 267.0),
    ("7 MB", "wide", 36.86, 218.0),
];

pub fn table3_figures(rows: &[table3::Table3Result]) -> Vec<Figure> {
    let mut out = Vec::new();
    for pair in rows.chunks(2) {
        let (n, w) = (&pair[0], &pair[1]);
        let size = if n.sequential_request_bytes == 896 << 10 {
            "896 KB"
        } else {
            "7 MB"
        };
        let paper = |policy: &str| {
            PAPER_TABLE_3
                .iter()
                .find(|p| p.0 == size && p.1 == policy)
                .expect("a paper row")
        };
        let (pn, pw) = (paper("narrow"), paper("wide"));
        for (policy, r, p) in [("narrow", n, pn), ("wide", w, pw)] {
            out.push(Figure::new(
                format!("table3/{size}/{policy}/sequential_mb_s"),
                format!("Table 3 {size} {policy}: sequential"),
                "MB/s",
                r.sequential_mb_per_s,
                format!("{} MB/s", p.2),
            ));
            out.push(Figure::new(
                format!("table3/{size}/{policy}/oltp_iops"),
                format!("Table 3 {size} {policy}: OLTP"),
                "IOPS",
                r.oltp_iops,
                format!("{} tpmC", p.3),
            ));
        }
        out.push(Figure::new(
            format!("table3/{size}/sequential_ratio"),
            format!("Table 3 {size}: sequential wide/narrow"),
            "ratio",
            w.sequential_mb_per_s / n.sequential_mb_per_s,
            format!("{:.2}", pw.2 / pn.2),
        ));
        out.push(Figure::new(
            format!("table3/{size}/oltp_ratio"),
            format!("Table 3 {size}: OLTP wide/narrow"),
            "ratio",
            w.oltp_iops / n.oltp_iops,
            format!("{:.2}", pw.3 / pn.3),
        ));
    }
    out
}
