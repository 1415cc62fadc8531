//! `cordillera lab striping`: narrow vs wide striping (Goyal, Radkov, Shenoy) on the simulator.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use cordillera_lab::spread;
use cordillera_lab::striping::{self, Fig, Options, Point, SkewReport};
use cordillera_lab::striping::skew::{self, Records, Source};
use cordillera_lab::striping::table3::Table3Result;
use cordillera_trace::RecordReader;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FigArg {
    /// Figure 2(a): one store per array, large or small requests.
    #[value(name = "2a")]
    F2a,
    /// Figure 2(b): an anti-correlated large and small store per array.
    #[value(name = "2b")]
    F2b,
    /// Figure 3: the stripe unit (large 128 KB–1 MB, small 8–32 KB).
    #[value(name = "3")]
    F3,
    /// Figure 4: utilization, by inter-arrival times (large 30–100 ms, small 7–15 ms).
    #[value(name = "4")]
    F4,
    /// Figure 5: the large requests' size (64 KB–2 MB; stripe unit half the mean).
    #[value(name = "5")]
    F5,
    /// Figure 6: the fraction of writes (10–90 %).
    #[value(name = "6")]
    F6,
    /// Figure 7: the correlation of each array's pair (−1 … +1), arrays independent or
    /// synchronized.
    #[value(name = "7")]
    F7,
    /// Figures 8 and 9: Table 2's streams (or --trace's volumes) on 4 arrays, per-stream mean
    /// and p95, per-array utilization CDF.
    #[value(name = "8")]
    F8,
    /// Figure 10: as 8, with array 2's two busiest streams stopped after a tenth of the run.
    #[value(name = "10")]
    F10,
    /// Table 3: an OLTP-like store beside a sequential reader (896 KB or 7 MB requests) on two
    /// RAID-5 7+p arrays, closed loop.
    #[value(name = "table3")]
    T3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WideLayout {
    Units,
    Stripes,
}

#[derive(Args)]
pub struct StripingArgs {
    /// Array counts (RAID-5 4+p of Fujitsu MAJ3182MC disks; the paper: 1 to 25).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 4, 8, 16, 25])]
    arrays: Vec<usize>,
    /// Figures to run (each for every --arrays count).
    #[arg(long, value_delimiter = ',', value_enum, default_values_t = [
        FigArg::F2a, FigArg::F2b, FigArg::F3, FigArg::F4, FigArg::F5, FigArg::F6, FigArg::F7,
        FigArg::F8, FigArg::F10, FigArg::T3
    ])]
    figures: Vec<FigArg>,
    /// Simulated seconds of each run (one narrow and one wide per point).
    #[arg(long, default_value_t = 600.0)]
    duration_s: f64,
    /// How busy a store keeps its array's disks while ON (§3.2.1: 70–80 %).
    #[arg(long, default_value_t = 0.75)]
    utilization: f64,
    /// Mean ON period, seconds (OFF periods are as long).
    #[arg(long, default_value_t = 10.0)]
    mean_on_s: f64,
    /// How a wide store goes across arrays: `units` (the next array every stripe unit) or
    /// `stripes` (every whole RAID stripe of the store's unit, as a volume manager striping
    /// across arrays would).
    #[arg(long, value_enum, default_value_t = WideLayout::Units)]
    wide_layout: WideLayout,
    /// Figures 8–10: a recorded WebSearch fragment to loop as WebSearch 1–3 (an MQSim ASCII5
    /// file such as `umass/umass_websearch_small.mqsim.trace`, time in ns unless --time-unit);
    /// without it WebSearch is generated from Table 2 like the Financial traces.
    #[arg(long)]
    websearch: Option<PathBuf>,
    /// Figures 8–10 on these traces instead of Table 2 (repeat to merge; each volume, an SPC
    /// ASU say, is a stream).
    #[arg(long)]
    trace: Vec<PathBuf>,
    /// Format of --trace files (detected from content when absent).
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::Format))]
    format: Option<cordillera_trace::Format>,
    /// Unit of ASCII5 timestamps in --trace and --websearch files.
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::TimeUnit))]
    time_unit: Option<cordillera_trace::TimeUnit>,
    /// Skip malformed lines of --trace instead of stopping at the first.
    #[arg(long)]
    skip_invalid: bool,
    /// Seed of the streams (arrivals, sizes, offsets, ON periods).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No progress on standard error (it is printed whether or not standard error is a
    /// terminal: a status line on a terminal, a line per step otherwise).
    #[arg(long)]
    quiet: bool,
    /// Run this many seeds (--seed, --seed + 1, …) and report each figure's spread.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write points.csv and spread.json here.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: StripingArgs) -> Result<()> {
    if a.arrays.is_empty() || a.arrays.iter().any(|&n| n == 0 || n > 64) {
        bail!("--arrays: 1 to 64 arrays each");
    }
    if !(a.duration_s >= 10.0 && a.duration_s <= 1e6) {
        bail!("--duration-s must be 10 to 10^6");
    }
    if !(a.utilization > 0.0 && a.utilization < 1.0) {
        bail!("--utilization must be between 0 and 1");
    }
    // ON periods shape generated streams only: Figures 8 and 10 on --trace's volumes have none.
    let generated = a.trace.is_empty()
        || a.figures
            .iter()
            .any(|f| !matches!(f, FigArg::F8 | FigArg::F10));
    if generated && !(a.mean_on_s > 0.0 && a.mean_on_s * 2.0 <= a.duration_s) {
        bail!("--mean-on-s must be positive and at most half of --duration-s");
    }
    if a.seeds == 0 || a.seeds > 1000 || a.seed.checked_add(a.seeds).is_none() {
        bail!("--seeds must be 1 to 1000 (and --seed + --seeds must not overflow)");
    }
    let options = Options {
        arrays: a.arrays.clone(),
        duration_s: a.duration_s,
        utilization: a.utilization,
        mean_on_s: a.mean_on_s,
        wide_whole_stripes: a.wide_layout == WideLayout::Stripes,
        figures: a
            .figures
            .iter()
            .map(|f| match f {
                FigArg::F2a => Fig::F2a,
                FigArg::F2b => Fig::F2b,
                FigArg::F3 => Fig::F3,
                FigArg::F4 => Fig::F4,
                FigArg::F5 => Fig::F5,
                FigArg::F6 => Fig::F6,
                FigArg::F7 => Fig::F7,
                _ => Fig::F2a,
            })
            .zip(a.figures.iter())
            .filter(|(_, f)| !matches!(f, FigArg::F8 | FigArg::F10 | FigArg::T3))
            .map(|(f, _)| f)
            .collect(),
    };
    let wants_skew = a
        .figures
        .iter()
        .any(|f| matches!(f, FigArg::F8 | FigArg::F10));
    let trace_source = if wants_skew && !a.trace.is_empty() {
        Some(trace_source(&a)?)
    } else {
        None
    };
    let mut skew_description = None;
    let reporter = crate::progress::Progress::new(a.quiet);
    let mut runs = Vec::new();
    let mut all: Vec<(u64, Vec<Point>)> = Vec::new();
    let mut skews: Vec<(u64, SkewReport)> = Vec::new();
    let mut tables: Vec<(u64, Vec<Table3Result>)> = Vec::new();
    for seed in a.seed..a.seed + a.seeds {
        let mut progress = |p: &Point| {
            reporter.step(&format!(
                "seed {seed}: Fig {} {}, {} arrays{}: narrow {:.1} ms, wide {:.1} ms, ratio {:.3}",
                p.figure,
                p.series,
                p.arrays,
                p.x.map_or(String::new(), |x| format!(", x = {x}")),
                p.narrow_ms,
                p.wide_ms,
                p.ratio
            ));
        };
        let points = if options.figures.is_empty() {
            Vec::new()
        } else {
            striping::run(&options, seed, &mut progress)
                .map_err(|e| anyhow::anyhow!("seed {seed}: {e}"))?
        };
        let mut figures = striping::figures(&points);
        if wants_skew {
            let source = match &trace_source {
                Some(s) => Source {
                    names: s.names.clone(),
                    open: s.open.clone(),
                    description: s.description.clone(),
                },
                None => table2_source(&a, seed)?,
            };
            skew_description = Some(source.description.clone());
            let source = &source;
            for (fig, ten) in [(FigArg::F8, false), (FigArg::F10, true)] {
                if !a.figures.contains(&fig) {
                    continue;
                }
                let r = striping::run_skew(
                    source,
                    a.duration_s,
                    a.wide_layout == WideLayout::Stripes,
                    seed,
                    ten,
                )
                .map_err(|e| {
                    anyhow::anyhow!("seed {seed}: Fig {}: {e}", if ten { "10" } else { "8" })
                })?;
                reporter.step(&format!(
                    "seed {seed}: Fig {}: {} streams ({} dropped as idle) on 4 arrays, partition imbalance {:.2} %; wide/narrow geometric mean {:.3} (mean), {:.3} (p95)",
                    r.figure,
                    r.streams.len(),
                    r.dropped.len(),
                    r.imbalance * 100.0,
                    r.geomean_ratio_mean,
                    r.geomean_ratio_p95
                ));
                figures.extend(striping::skew_figures(&r));
                skews.push((seed, r));
            }
        }
        if a.figures.contains(&FigArg::T3) {
            let rows = striping::run_table3(a.duration_s, seed)
                .map_err(|e| anyhow::anyhow!("seed {seed}: Table 3: {e}"))?;
            reporter.step(&format!("seed {seed}: Table 3 done"));
            figures.extend(striping::table3_figures(&rows));
            tables.push((seed, rows));
        }
        runs.push((seed, figures));
        all.push((seed, points));
    }
    let rows = spread::spread(&runs);
    let seeds: Vec<u64> = runs.iter().map(|(s, _)| *s).collect();
    let doc = serde_json::json!({
        "seeds": seeds,
        "wide_layout": format!("{:?}", a.wide_layout).to_lowercase(),
        "duration_s": a.duration_s,
        "utilization": a.utilization,
        "spread": rows,
        "runs": all.iter().map(|(s, p)| serde_json::json!({"seed": s, "points": p})).collect::<Vec<_>>(),
        "skew": skews.iter().map(|(s, r)| serde_json::json!({"seed": s, "report": r})).collect::<Vec<_>>(),
        "table3": tables.iter().map(|(s, r)| serde_json::json!({"seed": s, "rows": r})).collect::<Vec<_>>(),
    });
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        let mut csv = String::from(
            "seed,figure,series,arrays,x,x_label,narrow_utilization,narrow_ms,wide_ms,ratio,rate_on_per_s\n",
        );
        for (seed, points) in &all {
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
        if !skews.is_empty() {
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
            for (seed, r) in &skews {
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
            header.extend(striping::CDF_QUANTILES.iter().map(|q| format!("q{q}")));
            w.write_record(&header)?;
            for (seed, r) in &skews {
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
        }
        std::fs::write(dir.join("spread.json"), serde_json::to_string_pretty(&doc)?)?;
        let svgs = cordillera_lab::render::striping::write_svgs(dir, &all, &skews, &tables)?;
        eprintln!("wrote {} SVG figures to {}", svgs.len(), dir.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "lab striping: wide over narrow mean response time, RAID-5 4+p arrays of fujitsu-maj3182mc, wide stores across arrays by {}, stores {:.0} % busy while ON, {} s per run, seeds {}–{}",
        match a.wide_layout {
            WideLayout::Units => "stripe unit",
            WideLayout::Stripes => "whole RAID stripe",
        },
        a.utilization * 100.0,
        a.duration_s,
        a.seed,
        a.seed + a.seeds - 1
    );
    if let Some(d) = &skew_description {
        println!("Figures 8–10 streams: {d}");
    }
    print!("{}", spread::table(&rows, runs.len()));
    if let Some(dir) = &a.out {
        println!(
            "\npoints.csv, spread.json, the SVG figures{} in {}",
            if skews.is_empty() {
                ""
            } else {
                ", streams.csv and utilization_cdf.csv"
            },
            dir.display()
        );
    }
    Ok(())
}

/// Opens a trace file (or `gen:` workload) for the skew figures, as time-ordered records.
fn open_records(
    paths: &[PathBuf],
    format: Option<cordillera_trace::Format>,
    time_unit: Option<cordillera_trace::TimeUnit>,
    skip_invalid: bool,
) -> Result<Box<dyn RecordReader>, String> {
    let mut readers = Vec::new();
    for p in paths {
        let input = crate::lab_io::trace_input(p, format, time_unit, skip_invalid);
        readers.push(input.open().map_err(|e| e.to_string())?);
    }
    if readers.len() == 1 {
        return Ok(readers.pop().expect("one"));
    }
    Ok(Box::new(
        cordillera_trace::merge::Merged::new(readers).map_err(|e| e.to_string())?,
    ))
}

fn records_of(mut reader: Box<dyn RecordReader>) -> Records {
    Box::new(std::iter::from_fn(move || {
        reader.next_record().map_err(|e| e.to_string()).transpose()
    }))
}

/// Figures 8–10's streams from --trace's volumes.
fn trace_source(a: &StripingArgs) -> Result<Source> {
    {
        // A first pass for the volume names (streams are numbered in order of appearance).
        let mut reader = open_records(&a.trace, a.format, a.time_unit, a.skip_invalid)
            .map_err(anyhow::Error::msg)?;
        while reader.next_record()?.is_some() {}
        let names: Vec<String> = reader
            .volumes()
            .names()
            .map(|(_, n)| n.to_string())
            .collect();
        if names.is_empty() {
            bail!("--trace: no requests");
        }
        let (paths, format, unit, skip) = (a.trace.clone(), a.format, a.time_unit, a.skip_invalid);
        let open = Arc::new(move || -> Result<Records, String> {
            Ok(records_of(open_records(&paths, format, unit, skip)?))
        });
        Ok(Source {
            description: format!(
                "{} ({} volumes, each a stream)",
                a.trace
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                names.len()
            ),
            names,
            open,
        })
    }
}

/// Table 2's streams for one seed (WebSearch from --websearch when given).
fn table2_source(a: &StripingArgs, seed: u64) -> Result<Source> {
    let fragment = match &a.websearch {
        None => None,
        Some(path) => {
            let (path, unit) = (
                path.clone(),
                a.time_unit.or(Some(cordillera_trace::TimeUnit::Ns)),
            );
            let name = path.display().to_string();
            let open = Arc::new(move || -> Result<Records, String> {
                Ok(records_of(open_records(
                    std::slice::from_ref(&path),
                    None,
                    unit,
                    false,
                )?))
            });
            Some(skew::Fragment::new(&name, open).map_err(anyhow::Error::msg)?)
        }
    };
    Ok(skew::table2(fragment, a.duration_s, seed))
}
