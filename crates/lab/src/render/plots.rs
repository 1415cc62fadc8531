//! SVG plots of the lab's reports (plotters' SVG backend).

use std::path::Path;

use crate::everest::Report;
use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// One line of a chart: its name and points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

pub fn chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    log_y: bool,
    series: &[Series],
) -> Result<()> {
    chart_xy(path, title, x_label, y_label, false, log_y, series)
}

/// Lines (with points on a log axis) on linear or logarithmic axes; tick labels are the
/// values themselves (a log axis is labelled 16, 64, 256, not 4, 6, 8).
pub fn chart_xy(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    log_x: bool,
    log_y: bool,
    series: &[Series],
) -> Result<()> {
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        if (log_y && y <= 0.0) || (log_x && x <= 0.0) {
            continue;
        }
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (1.0, 2.0, 1.0, 10.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("plotting {}: {e}", path.display());
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    // The same drawing on every kind of axis (their coordinate types differ).
    macro_rules! draw {
        ($chart:expr) => {{
            let mut c = $chart;
            c.configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .x_label_formatter(&|x: &f64| tick(*x))
                .y_label_formatter(&|y: &f64| tick(*y))
                .draw()
                .map_err(err)?;
            for (i, s) in series.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                // A log axis cannot show zero or less.
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|p| (!log_y || p.1 > 0.0) && (!log_x || p.0 > 0.0))
                    .collect();
                c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(err)?
                    .label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
                if log_y || log_x || pts.len() < 12 {
                    c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                        .map_err(err)?;
                }
            }
            c.configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }};
    }
    // Head room above the data for the legend.
    let rows = series.len() as f64;
    let (xl, xh) = if log_x {
        (x0 / 1.3, x1 * 1.3)
    } else {
        (x0, x1)
    };
    match (log_x, log_y) {
        (false, false) => {
            let hi = if y1 > 0.0 {
                y1 * (1.15 + 0.07 * rows)
            } else {
                1.0
            };
            draw!(builder.build_cartesian_2d(xl..xh, 0f64..hi).map_err(err)?);
        }
        (false, true) => {
            let lo = (y0 / 2.0).max(1e-3);
            let hi = (y1 * 2.0).max(lo * 10.0) * 10f64.powf(rows / 3.0);
            draw!(builder
                .build_cartesian_2d(xl..xh, (lo..hi).log_scale())
                .map_err(err)?);
        }
        (true, false) => {
            let hi = if y1 > 0.0 {
                y1 * (1.15 + 0.07 * rows)
            } else {
                1.0
            };
            draw!(builder
                .build_cartesian_2d((xl..xh).log_scale(), 0f64..hi)
                .map_err(err)?);
        }
        (true, true) => {
            let lo = (y0 / 2.0).max(1e-3);
            let hi = (y1 * 2.0).max(lo * 10.0) * 10f64.powf(rows / 3.0);
            draw!(builder
                .build_cartesian_2d((xl..xh).log_scale(), (lo..hi).log_scale())
                .map_err(err)?);
        }
    }
    root.present()
        .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    Ok(())
}

/// A bar with a whisker from `low` to `high` (none when they equal the value).
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

impl Bar {
    pub fn plain(value: f64) -> Bar {
        Bar {
            value,
            low: value,
            high: value,
        }
    }
}

/// A grouped bar chart: one group per entry of `groups`, one bar per series in each (a
/// missing value draws no bar).
pub fn bars(
    path: &Path,
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<()> {
    let series: Vec<(String, Vec<Option<Bar>>)> = series
        .iter()
        .map(|(name, v)| (name.clone(), v.iter().map(|v| v.map(Bar::plain)).collect()))
        .collect();
    ranged_bars(path, title, y_label, false, groups, &series)
}

/// Grouped bars with whiskers, on a linear or logarithmic y axis; the legend sits in head room
/// above the tallest whisker, so it never covers a bar.
pub fn ranged_bars(
    path: &Path,
    title: &str,
    y_label: &str,
    log_y: bool,
    groups: &[String],
    series: &[(String, Vec<Option<Bar>>)],
) -> Result<()> {
    let all = || series.iter().flat_map(|(_, v)| v.iter().flatten());
    let top = all().fold(0.0f64, |m, b| m.max(b.high).max(b.value));
    let bottom = all()
        .map(|b| b.low.min(b.value))
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let width = (140 + groups.len() * (series.len() * 16 + 30)).max(720) as u32;
    let root = SVGBackend::new(path, (width, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("plotting {}: {e}", path.display());
    let n = groups.len().max(1);
    let labels = groups.to_vec();
    let slot = 0.8 / series.len().max(1) as f64;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    macro_rules! draw {
        ($chart:expr, $base:expr) => {{
            let mut c = $chart;
            c.configure_mesh()
                .disable_x_mesh()
                .x_labels(n * 2 + 1)
                .x_label_formatter(&|x: &f64| {
                    let i = x.floor() as usize;
                    if (x - i as f64 - 0.5).abs() < 1e-6 {
                        labels.get(i).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y: &f64| tick(*y))
                .y_desc(y_label)
                .draw()
                .map_err(err)?;
            for (k, (name, values)) in series.iter().enumerate() {
                let color = COLORS[k % COLORS.len()];
                let place = |g: usize| g as f64 + 0.1 + k as f64 * slot;
                c.draw_series(values.iter().enumerate().filter_map(|(g, v)| {
                    v.filter(|b| !log_y || b.value > 0.0).map(|b| {
                        let x0 = place(g);
                        Rectangle::new([(x0, $base), (x0 + slot * 0.9, b.value)], color.filled())
                    })
                }))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
                for (g, b) in values.iter().enumerate() {
                    let Some(b) = b else { continue };
                    if b.low == b.high || (log_y && b.low <= 0.0) {
                        continue;
                    }
                    let mid = place(g) + slot * 0.45;
                    let cap = slot * 0.2;
                    let ink = BLACK.stroke_width(1);
                    for line in [
                        vec![(mid, b.low), (mid, b.high)],
                        vec![(mid - cap, b.low), (mid + cap, b.low)],
                        vec![(mid - cap, b.high), (mid + cap, b.high)],
                    ] {
                        c.draw_series(std::iter::once(PathElement::new(line, ink)))
                            .map_err(err)?;
                    }
                }
            }
            c.configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }};
    }
    if log_y {
        let lo = if bottom.is_finite() {
            10f64.powf((bottom / 2.0).log10().floor())
        } else {
            1.0
        };
        // Head room for the legend: a decade per two series above the tallest whisker.
        let hi = (top.max(lo * 10.0)) * 10f64.powf(1.0 + series.len() as f64 / 3.0);
        draw!(
            builder
                .build_cartesian_2d(0f64..n as f64, (lo..hi).log_scale())
                .map_err(err)?,
            lo
        );
    } else {
        let hi = if top > 0.0 {
            top * (1.25 + 0.08 * series.len() as f64)
        } else {
            1.0
        };
        draw!(
            builder
                .build_cartesian_2d(0f64..n as f64, 0f64..hi)
                .map_err(err)?,
            0.0
        );
    }
    root.present()
        .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    Ok(())
}

/// A tick label: the value itself, as short as it can be written (1, 10, 0.5, 2500).
pub fn tick(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        format!("{v:.0e}")
    } else if (v - v.round()).abs() < 1e-9 * a.max(1.0) {
        format!("{}", v.round() as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// Figure 5 as the paper draws it: per episode, reads and writes, a bar per configuration for
/// the mean response time, its whisker up to the 99th percentile (log scale).
fn figure5(dir: &Path, r: &Report) -> Result<()> {
    let mut groups = Vec::new();
    let mut series: Vec<(String, Vec<Option<Bar>>)> =
        ["baseline", "always off-load", "peak off-load"]
            .iter()
            .map(|n| (n.to_string(), Vec::new()))
            .collect();
    for e in &r.episodes {
        for (op, read) in [("reads", true), ("writes", false)] {
            groups.push(format!("episode {} {op}", e.rank));
            for (k, c) in [&e.configs.baseline, &e.configs.always, &e.configs.peak]
                .into_iter()
                .enumerate()
            {
                let (mean, p99) = if read {
                    (c.read_mean_ms, c.read_p99_ms)
                } else {
                    (c.write_mean_ms, c.write_p99_ms)
                };
                series[k].1.push(mean.map(|m| Bar {
                    value: m,
                    low: m,
                    high: p99.unwrap_or(m).max(m),
                }));
            }
        }
    }
    ranged_bars(
        &dir.join("fig5_response_times.svg"),
        "Mean response time per peak episode; whiskers to the 99th percentile (Everest Fig. 5)",
        "response time, ms (log scale)",
        true,
        &groups,
        &series,
    )
}

pub fn write_svgs(dir: &Path, r: &Report) -> Result<()> {
    figure5(dir, r)?;
    // Figure 6: off-loaded data over time.
    let mut fig6 = Vec::new();
    for e in &r.episodes {
        for (name, c) in [("always", &e.configs.always), ("peak", &e.configs.peak)] {
            fig6.push(Series {
                name: format!("episode {}, {name}", e.rank),
                points: c
                    .offloaded_bytes
                    .iter()
                    .enumerate()
                    .map(|(k, b)| (k as f64 * r.sample_s / 60.0, *b as f64 / 1e6))
                    .collect(),
            });
        }
    }
    chart(
        &dir.join("fig6_offloaded.svg"),
        "Off-loaded data over time (Everest Fig. 6)",
        "minutes from the episode start",
        "off-loaded data, MB",
        false,
        &fig6,
    )?;
    // Figure 7: per parameter, response time and off-loaded data on charts of their own (one
    // unit per axis), the parameter on a log axis labelled with its values.
    for parameter in ["t_base", "t_store", "n_reclaim"] {
        let pts: Vec<_> = r
            .sensitivity
            .iter()
            .filter(|p| p.parameter == parameter)
            .collect();
        if pts.is_empty() {
            continue;
        }
        let name = match parameter {
            "t_base" => "T_base",
            "t_store" => "T_store",
            _ => "N_reclaim",
        };
        chart_xy(
            &dir.join(format!("fig7_{parameter}_response.svg")),
            &format!("Mean response time vs {name} (Everest Fig. 7)"),
            name,
            "mean response time, ms",
            true,
            false,
            &[Series {
                name: "peak off-load, all episodes".into(),
                points: pts
                    .iter()
                    .filter_map(|p| p.mean_ms.map(|m| (p.value as f64, m)))
                    .collect(),
            }],
        )?;
        chart_xy(
            &dir.join(format!("fig7_{parameter}_offloaded.svg")),
            &format!("Mean off-loaded data vs {name} (Everest Fig. 7)"),
            name,
            "mean off-loaded data, MB",
            true,
            false,
            &[Series {
                name: "peak off-load, all episodes".into(),
                points: pts
                    .iter()
                    .map(|p| (p.value as f64, p.offloaded_mean_mb))
                    .collect(),
            }],
        )?;
    }
    if let Some(m) = &r.micro {
        let pair = |points: &[crate::everest::MicroPoint]| {
            [
                Series {
                    name: "off-load".into(),
                    points: points.iter().map(|p| (p.x, p.offload_mb_per_s)).collect(),
                },
                Series {
                    name: "no off-load".into(),
                    points: points
                        .iter()
                        .filter_map(|p| p.baseline_mb_per_s.map(|b| (p.x, b)))
                        .collect(),
                },
            ]
        };
        chart(
            &dir.join("fig13a_read_ratio.svg"),
            "Throughput vs read percentage (Everest Fig. 13a)",
            "reads, %",
            "MB/s",
            false,
            &pair(&m.read_ratio),
        )?;
        chart_xy(
            &dir.join("fig13b_reclaim.svg"),
            "Reclaim throughput vs N_reclaim (Everest Fig. 13b)",
            "N_reclaim",
            "MB/s",
            true,
            false,
            &[
                Series {
                    name: "random".into(),
                    points: m
                        .reclaim_random
                        .iter()
                        .map(|p| (p.x, p.offload_mb_per_s))
                        .collect(),
                },
                Series {
                    name: "streaming".into(),
                    points: m
                        .reclaim_streaming
                        .iter()
                        .map(|p| (p.x, p.offload_mb_per_s))
                        .collect(),
                },
            ],
        )?;
        chart(
            &dir.join("fig13c_stores.svg"),
            "Write throughput vs stores (Everest Fig. 13c)",
            "stores",
            "MB/s",
            false,
            &pair(&m.stores),
        )?;
    }
    Ok(())
}
