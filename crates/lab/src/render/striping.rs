//! SVG figures of `lab striping`: each of the paper's figures that we run, values averaged
//! over the seeds (Figures 2–7, Table 3) or of the first seed (Figures 8–10, per stream).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;

use super::plots::{bars, chart, Series};
use crate::spread;
use crate::striping::seeds::SeedsReport;
use crate::striping::table3::Table3Result;
use crate::striping::{Point, SkewReport, CDF_QUANTILES};

/// Writes `points.csv`, `spread.json`, the SVG figures and, when Figures 8–10 ran,
/// `streams.csv` and `utilization_cdf.csv` into `dir`; returns the SVG files written.
pub fn write_seed_files(dir: &Path, r: &SeedsReport) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut csv = String::from(
        "seed,figure,series,arrays,x,x_label,narrow_utilization,narrow_ms,wide_ms,ratio,rate_on_per_s\n",
    );
    for (seed, points) in &r.points {
        for p in points {
            csv.push_str(&format!(
                "{seed},{},\"{}\",{},{},\"{}\",{:.4},{:.4},{:.4},{:.5},{:.4}\n",
                p.figure,
                p.series,
                p.arrays,
                p.x.map_or(String::new(), |x| x.to_string()),
                p.x_label,
                p.narrow_utilization,
                p.narrow_ms,
                p.wide_ms,
                p.ratio,
                p.rate_on_per_s
            ));
        }
    }
    std::fs::write(dir.join("points.csv"), csv)?;
    if !r.skews.is_empty() {
        write_skew_csvs(dir, &r.skews)?;
    }
    std::fs::write(
        dir.join("spread.json"),
        serde_json::to_string_pretty(&r.json())?,
    )?;
    write_svgs(dir, &r.points, &r.skews, &r.tables)
}

/// `streams.csv` (each stream's response times, narrow and wide) and `utilization_cdf.csv`.
fn write_skew_csvs(dir: &Path, skews: &[(u64, SkewReport)]) -> Result<()> {
    let mut w = csv::Writer::from_path(dir.join("streams.csv"))?;
    w.write_record([
        "seed",
        "figure",
        "stream",
        "array",
        "requests",
        "weighted_iops",
        "narrow_mean_ms",
        "narrow_p95_ms",
        "wide_mean_ms",
        "wide_p95_ms",
    ])?;
    let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    for (seed, r) in skews {
        for s in &r.streams {
            w.write_record([
                seed.to_string(),
                r.figure.to_string(),
                s.name.clone(),
                (s.array + 1).to_string(),
                s.requests.to_string(),
                format!("{:.3}", s.weighted_iops),
                f(s.narrow_mean_ms),
                f(s.narrow_p95_ms),
                f(s.wide_mean_ms),
                f(s.wide_p95_ms),
            ])?;
        }
    }
    w.flush()?;
    let mut w = csv::Writer::from_path(dir.join("utilization_cdf.csv"))?;
    let mut header = vec![
        "seed".to_string(),
        "figure".into(),
        "policy".into(),
        "array".into(),
        "mean".into(),
    ];
    header.extend(CDF_QUANTILES.iter().map(|q| format!("q{q}")));
    w.write_record(&header)?;
    for (seed, r) in skews {
        for c in &r.utilization_cdf {
            let mut row = vec![
                seed.to_string(),
                r.figure.to_string(),
                c.policy.to_string(),
                (c.array + 1).to_string(),
                format!("{:.4}", c.mean),
            ];
            row.extend(c.quantiles.iter().map(|q| format!("{q:.4}")));
            w.write_record(&row)?;
        }
    }
    w.flush()?;
    Ok(())
}

/// The report as a table: the setup, then each figure's spread over the seeds.
pub fn seeds_text(r: &SeedsReport) -> String {
    let seeds: Vec<u64> = r.runs.iter().map(|(s, _)| *s).collect();
    let mut out = format!(
        "lab striping: wide over narrow mean response time, RAID-5 4+p arrays of fujitsu-maj3182mc{}, wide stores across arrays by {}, stores {:.0} % busy {}, {} s per run, seeds {}–{}\n",
        if r.skew_arrays.is_some() {
            " (Figures 8–10: the arrays below)"
        } else {
            ""
        },
        if r.wide_whole_stripes {
            "whole RAID stripe"
        } else {
            "stripe unit"
        },
        r.utilization * 100.0,
        if r.model.utilization_of.while_on() {
            "while ON"
        } else {
            "over the run"
        },
        r.duration_s,
        seeds.first().copied().unwrap_or(0),
        seeds.last().copied().unwrap_or(0)
    );
    let model = r.model.describe();
    if !model.is_empty() || r.mean_on_s != 10.0 {
        out.push_str(&format!(
            "Figures 2–7: mean ON period {} s{}{model}\n",
            r.mean_on_s,
            if model.is_empty() { "" } else { ", " }
        ));
    }
    if let Some(d) = &r.skew_description {
        out.push_str(&format!("Figures 8–10 streams: {d}\n"));
    }
    if let Some(a) = &r.skew_arrays {
        out.push_str(&format!("Figures 8–10 arrays: {a}\n"));
    }
    if let Some((_, rows)) = r.tables.first() {
        out.push_str(&match rows.first().and_then(|t| t.channel_mb_per_s) {
            Some(mb) => format!("Table 3: the adapter's path to each array {mb} MB/s\n"),
            None => "Table 3: no adapter limit (the disks alone)\n".to_string(),
        });
    }
    out.push_str(&spread::table(&r.spread, r.runs.len()));
    out
}

/// Writes `figure_*.svg` into `dir`; returns the files written.
pub fn write_svgs(
    dir: &Path,
    points: &[(u64, Vec<Point>)],
    skews: &[(u64, SkewReport)],
    tables: &[(u64, Vec<Table3Result>)],
) -> Result<Vec<String>> {
    let mut written = figure_svgs(dir, points)?;
    written.extend(skew_svgs(dir, skews)?);
    written.extend(table3_svgs(dir, tables)?);
    Ok(written)
}

/// Figures 2–7: each the mean over seeds of wide / narrow against its x (or the arrays).
fn figure_svgs(dir: &Path, points: &[(u64, Vec<Point>)]) -> Result<Vec<String>> {
    let mut written = Vec::new();
    // Mean over seeds of each (figure, series, arrays, x).
    type Key<'a> = (&'a str, String, usize, i64);
    let mut mean: BTreeMap<Key, (f64, usize, &'static str)> = BTreeMap::new();
    for (_, ps) in points {
        for p in ps {
            let x = p.x.map_or(i64::MIN, |x| (x * 1000.0).round() as i64);
            let e = mean
                .entry((p.figure, p.series.clone(), p.arrays, x))
                .or_insert((0.0, 0, p.x_label));
            e.0 += p.ratio;
            e.1 += 1;
        }
    }
    let figures: Vec<&str> = {
        let mut f: Vec<&str> = mean.keys().map(|k| k.0).collect();
        f.dedup();
        f
    };
    for figure in figures {
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        let mut x_label = "";
        for ((f, s, arrays, x), (sum, n, label)) in &mean {
            if *f != figure {
                continue;
            }
            let ratio = sum / *n as f64;
            if *x == i64::MIN {
                // Figure 2: against the number of arrays.
                series
                    .entry(s.clone())
                    .or_default()
                    .push((*arrays as f64, ratio));
            } else {
                x_label = label;
                series
                    .entry(format!("{s}, {arrays} arrays"))
                    .or_default()
                    .push((*x as f64 / 1000.0, ratio));
            }
        }
        let series: Vec<Series> = series
            .into_iter()
            .map(|(name, mut points)| {
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series { name, points }
            })
            .collect();
        let name = format!("figure_{figure}.svg");
        chart(
            &dir.join(&name),
            &format!("Figure {figure}: wide / narrow mean response time"),
            if x_label.is_empty() {
                "arrays"
            } else {
                x_label
            },
            "wide / narrow",
            false,
            &series,
        )?;
        written.push(name);
    }
    Ok(written)
}

/// Figures 8–10: the skewed streams' response times and utilization.
fn skew_svgs(dir: &Path, skews: &[(u64, SkewReport)]) -> Result<Vec<String>> {
    let mut written = Vec::new();
    for fig in ["8-9", "10"] {
        let Some((seed, r)) = skews.iter().find(|(_, r)| r.figure == fig) else {
            continue;
        };
        if fig == "8-9" {
            let groups: Vec<String> = (1..=r.streams.len()).map(|i| i.to_string()).collect();
            for (what, narrow, wide) in [
                (
                    "mean",
                    r.streams
                        .iter()
                        .map(|s| s.narrow_mean_ms)
                        .collect::<Vec<_>>(),
                    r.streams.iter().map(|s| s.wide_mean_ms).collect::<Vec<_>>(),
                ),
                (
                    "p95",
                    r.streams.iter().map(|s| s.narrow_p95_ms).collect(),
                    r.streams.iter().map(|s| s.wide_p95_ms).collect(),
                ),
            ] {
                let name = format!("figure_8_{what}.svg");
                bars(
                    &dir.join(&name),
                    &format!("Figure 8: {what} response time per stream (seed {seed})"),
                    &format!("{what} response time, ms"),
                    &groups,
                    &[("narrow".into(), narrow), ("wide".into(), wide)],
                )?;
                written.push(name);
            }
            for policy in ["narrow", "wide"] {
                let series: Vec<Series> = r
                    .utilization_cdf
                    .iter()
                    .filter(|c| c.policy == policy)
                    .map(|c| Series {
                        name: format!("array {}", c.array + 1),
                        points: c
                            .quantiles
                            .iter()
                            .zip(crate::striping::CDF_QUANTILES)
                            .map(|(u, q)| (*u, q))
                            .collect(),
                    })
                    .collect();
                let name = format!("figure_9_{policy}.svg");
                chart(
                    &dir.join(&name),
                    &format!("Figure 9: CDF of array utilization, {policy} (seed {seed})"),
                    "utilization over 10 s",
                    "fraction of intervals",
                    false,
                    &series,
                )?;
                written.push(name);
            }
        } else {
            let groups: Vec<String> = (1..=r.array_ratios.len())
                .map(|a| format!("array {a}"))
                .collect();
            let name = "figure_10.svg".to_string();
            bars(
                &dir.join(&name),
                &format!("Figure 10: wide / narrow mean per array, array 2 quiet (seed {seed})"),
                "wide / narrow",
                &groups,
                &[("streams of the array".into(), r.array_ratios.clone())],
            )?;
            written.push(name);
        }
    }
    Ok(written)
}

/// Table 3: the sequential and OLTP throughput of the first seed.
fn table3_svgs(dir: &Path, tables: &[(u64, Vec<Table3Result>)]) -> Result<Vec<String>> {
    let mut written = Vec::new();
    if let Some((seed, rows)) = tables.first() {
        let groups: Vec<String> = rows
            .chunks(2)
            .map(|p| {
                if p[0].sequential_request_bytes == 896 << 10 {
                    "896 KB".to_string()
                } else {
                    "7 MB".to_string()
                }
            })
            .collect();
        for (what, unit, f) in [
            (
                "sequential",
                "MB/s",
                (|r: &Table3Result| r.sequential_mb_per_s) as fn(&Table3Result) -> f64,
            ),
            ("oltp", "IOPS", |r: &Table3Result| r.oltp_iops),
        ] {
            let narrow = rows.chunks(2).map(|p| Some(f(&p[0]))).collect();
            let wide = rows.chunks(2).map(|p| Some(f(&p[1]))).collect();
            let name = format!("table_3_{what}.svg");
            bars(
                &dir.join(&name),
                &format!("Table 3: {what} throughput by sequential request size (seed {seed})"),
                unit,
                &groups,
                &[("narrow".into(), narrow), ("wide".into(), wide)],
            )?;
            written.push(name);
        }
    }
    Ok(written)
}
