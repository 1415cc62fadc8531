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
}

impl Default for Options {
    fn default() -> Options {
        Options {
            arrays: vec![1, 2, 4, 8, 16, 25],
            duration_s: 600.0,
            utilization: 0.75,
            mean_on_s: 10.0,
            figures: vec![Fig::F2a, Fig::F2b],
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Fig {
    F2a,
    F2b,
}

/// One point of a figure: wide over narrow for one kind of store at one array count.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub figure: &'static str,
    pub series: String,
    pub arrays: usize,
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

/// Runs one scenario narrow and wide; a point per kind.
fn compare(
    figure: &'static str,
    series: &str,
    mut s: Scenario,
    o: &Options,
) -> Result<Vec<Point>, String> {
    s.duration_s = o.duration_s;
    s.mean_on_s = o.mean_on_s;
    s.solve_rates(o.utilization)?;
    let narrow = s.means_ms(&s.run(Policy::Narrow)?);
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
                    for p in compare("2a", &format!("{kind}, {series}"), s, o)? {
                        progress(&p);
                        points.push(p);
                    }
                }
            }
        }
        if o.figures.contains(&Fig::F2b) {
            let s = Scenario::paper(n, kinds(&["large", "small"]), seed);
            for p in compare("2b", "pair", s, o)? {
                progress(&p);
                points.push(p);
            }
        }
    }
    Ok(points)
}

/// The paper's statement for a point's series, as the paper states it.
fn paper(p: &Point) -> &'static str {
    match (p.figure, p.series.as_str()) {
        ("2a", s) if s.starts_with("large") => "within 10 %, wide better for large requests",
        ("2a", _) => "within 10 %, narrow better for small requests",
        ("2b", s) if s.ends_with("large") => "wide 15–20 % better (0.80–0.85)",
        ("2b", _) => "wide 30–42 % worse (1.30–1.42)",
        _ => "",
    }
}

/// Headline figures of one run, for the spread over seeds.
pub fn figures(points: &[Point]) -> Vec<Figure> {
    points
        .iter()
        .map(|p| {
            Figure::new(
                format!("fig{}/{}/{}", p.figure, p.series, p.arrays),
                format!(
                    "Fig {} {}, {} arrays: wide/narrow",
                    p.figure, p.series, p.arrays
                ),
                "ratio",
                p.ratio,
                paper(p),
            )
        })
        .collect()
}
