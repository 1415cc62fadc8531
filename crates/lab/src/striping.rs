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

use serde::Serialize;

use cordillera_striping::experiment::{Scenario, StreamKind};
use cordillera_striping::policy::Policy;

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
            for (large_kb, small_kb) in [(128u64, 8u64), (256, 16), (512, 24), (1024, 32)] {
                let mut s = pair();
                s.kinds[0].stripe_unit_bytes = large_kb << 10;
                s.kinds[1].stripe_unit_bytes = small_kb << 10;
                let x = Some((
                    large_kb as f64,
                    "large stripe unit, KB (small: 8, 16, 24, 32 KB)",
                ));
                add(&mut points, compare("3", "pair", x, s, Rates::Solve, o)?);
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
            for small_ms in [7.0, 10.0, 15.0] {
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
