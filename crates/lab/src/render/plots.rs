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
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        if log_y && y <= 0.0 {
            continue;
        }
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 1.0, 10.0);
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
    // The same drawing on either kind of y axis (their coordinate types differ).
    macro_rules! draw {
        ($chart:expr) => {{
            let mut c = $chart;
            c.configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .draw()
                .map_err(err)?;
            for (i, s) in series.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                // A log axis cannot show zero or less.
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|p| !log_y || p.1 > 0.0)
                    .collect();
                c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(err)?
                    .label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
                if log_y {
                    c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                        .map_err(err)?;
                }
            }
            c.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }};
    }
    if log_y {
        let lo = (y0 / 2.0).max(1e-3);
        let hi = (y1 * 2.0).max(lo * 10.0);
        draw!(builder
            .build_cartesian_2d(x0..x1, (lo..hi).log_scale())
            .map_err(err)?);
    } else {
        let hi = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
        draw!(builder.build_cartesian_2d(x0..x1, 0f64..hi).map_err(err)?);
    }
    root.present()
        .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    Ok(())
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
    let y1 = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(0.0f64, |m, v| m.max(*v));
    let hi = if y1 > 0.0 { y1 * 1.15 } else { 1.0 };
    let width = (120 + groups.len() * (series.len() * 14 + 30)).max(720) as u32;
    let root = SVGBackend::new(path, (width, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("plotting {}: {e}", path.display());
    let n = groups.len().max(1);
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..hi)
        .map_err(err)?;
    let labels = groups.to_vec();
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&move |x: &f64| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 1e-6 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_label)
        .draw()
        .map_err(err)?;
    let slot = 0.8 / series.len().max(1) as f64;
    for (k, (name, values)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        c.draw_series(values.iter().enumerate().filter_map(|(g, v)| {
            v.map(|v| {
                let x0 = g as f64 + 0.1 + k as f64 * slot;
                Rectangle::new([(x0, 0.0), (x0 + slot * 0.9, v)], color.filled())
            })
        }))
        .map_err(err)?
        .label(name.clone())
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present()
        .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    Ok(())
}

pub fn write_svgs(dir: &Path, r: &Report) -> Result<()> {
    // Figure 5: mean and 99th percentile response times per episode and configuration.
    let mut fig5 = Vec::new();
    for (name, pick) in [
        ("baseline", 0usize),
        ("always off-load", 1),
        ("peak off-load", 2),
    ] {
        for (op, read) in [("reads", true), ("writes", false)] {
            let points = r
                .episodes
                .iter()
                .filter_map(|e| {
                    let c = [&e.configs.baseline, &e.configs.always, &e.configs.peak][pick];
                    let v = if read {
                        c.read_mean_ms
                    } else {
                        c.write_mean_ms
                    };
                    v.map(|v| (e.rank as f64, v))
                })
                .collect();
            fig5.push(Series {
                name: format!("{name}, {op}"),
                points,
            });
        }
    }
    chart(
        &dir.join("fig5_response_times.svg"),
        "Mean response time per peak episode (Everest Fig. 5)",
        "peak episode",
        "mean response time, ms (log)",
        true,
        &fig5,
    )?;
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
    // Figure 7: one chart per parameter.
    for parameter in ["t_base", "t_store", "n_reclaim"] {
        let pts: Vec<_> = r
            .sensitivity
            .iter()
            .filter(|p| p.parameter == parameter)
            .collect();
        if pts.is_empty() {
            continue;
        }
        let series = [
            Series {
                name: "mean response time, ms".into(),
                points: pts
                    .iter()
                    .filter_map(|p| p.mean_ms.map(|m| ((p.value as f64).log2(), m)))
                    .collect(),
            },
            Series {
                name: "mean off-loaded data, MB".into(),
                points: pts
                    .iter()
                    .map(|p| ((p.value as f64).log2(), p.offloaded_mean_mb.max(1e-3)))
                    .collect(),
            },
        ];
        chart(
            &dir.join(format!("fig7_{parameter}.svg")),
            &format!("Sensitivity to {parameter} (Everest Fig. 7)"),
            &format!("log2 {parameter}"),
            "(log)",
            true,
            &series,
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
        chart(
            &dir.join("fig13b_reclaim.svg"),
            "Reclaim throughput vs N_reclaim (Everest Fig. 13b)",
            "log2 N_reclaim",
            "MB/s",
            false,
            &[
                Series {
                    name: "random".into(),
                    points: m
                        .reclaim_random
                        .iter()
                        .map(|p| (p.x.log2(), p.offload_mb_per_s))
                        .collect(),
                },
                Series {
                    name: "streaming".into(),
                    points: m
                        .reclaim_streaming
                        .iter()
                        .map(|p| (p.x.log2(), p.offload_mb_per_s))
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
