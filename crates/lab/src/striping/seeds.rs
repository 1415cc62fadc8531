//! `lab striping` over seeds: for each seed the figures asked for (2–7 on generated streams, 8
//! and 10 on Table 2's streams or a trace's volumes, Table 3), then each figure's spread over
//! the seeds; the streams of Figures 8–10 from a trace or Table 2 ([`trace_source`],
//! [`table2_source`]).

use std::path::PathBuf;
use std::sync::Arc;

use cordillera_trace::RecordReader;
use serde_json::json;

use super::skew::{self, Records, Source};
use super::table3::Table3Result;
use super::{Options, Point, SkewReport};
use crate::input::TraceInput;
use crate::spread::{self, Figure, Spread};

/// Where Figures 8–10's streams come from.
pub enum SkewStreams {
    /// A trace's volumes, each a stream (the same for every seed).
    Trace(Source),
    /// Table 2's streams, generated per seed; WebSearch looped from this fragment when given
    /// (its timestamps in `time_unit`, ns when absent).
    Table2 {
        websearch: Option<PathBuf>,
        time_unit: Option<cordillera_trace::TimeUnit>,
    },
    /// Recorded fragments' volumes, each file at its own speed, looped from a seeded phase.
    Fragments(Arc<super::fragments::Fragments>),
}

/// What to run.
pub struct SeedsConfig {
    /// Figures 2–7 (none: skipped).
    pub options: Options,
    pub fig8: bool,
    pub fig10: bool,
    pub table3: bool,
    /// Table 3: the adapter's path to each array, MB/s (none: unlimited).
    pub table3_channel_mb_per_s: Option<f64>,
    pub skew: SkewStreams,
    /// Figures 8–10 on arrays of this device (`lab striping --device`); the paper's RAID-5
    /// 4+p arrays of Fujitsu disks when absent.
    pub skew_device: Option<crate::devices::DeviceSpec>,
    pub seed: u64,
    pub seeds: u64,
}

/// Every seed's results and their spread.
pub struct SeedsReport {
    pub runs: Vec<(u64, Vec<Figure>)>,
    pub points: Vec<(u64, Vec<Point>)>,
    pub skews: Vec<(u64, SkewReport)>,
    pub tables: Vec<(u64, Vec<Table3Result>)>,
    /// What Figures 8–10's streams were, when they ran.
    pub skew_description: Option<String>,
    /// Figures 8–10's arrays when not the paper's (`--device`).
    pub skew_arrays: Option<String>,
    /// The fragments played as Figures 8–10's streams (`--fragments`).
    pub fragments: Option<Vec<super::fragments::FileInfo>>,
    pub spread: Vec<Spread>,
    pub wide_whole_stripes: bool,
    pub duration_s: f64,
    pub utilization: f64,
    pub mean_on_s: f64,
    /// Figures 2–7's modelling choices.
    pub model: super::model::Model,
}

/// Runs every seed in turn; `step` hears of each point and figure done.
pub fn run_seeds(c: &SeedsConfig, step: &mut dyn FnMut(&str)) -> Result<SeedsReport, String> {
    assert!(c.seeds > 0, "at least one seed");
    if c.table3_channel_mb_per_s
        .is_some_and(|mb| !(mb > 0.0 && mb.is_finite()))
    {
        return Err("--channel-mb-s must be 0 (no limit) or more".into());
    }
    let o = &c.options;
    let mut report = SeedsReport {
        runs: Vec::new(),
        points: Vec::new(),
        skews: Vec::new(),
        tables: Vec::new(),
        skew_description: None,
        skew_arrays: c
            .skew_device
            .as_ref()
            .map(|d| format!("4 arrays, each {}", d.describe())),
        fragments: match &c.skew {
            SkewStreams::Fragments(f) if c.fig8 || c.fig10 => Some(f.files.clone()),
            _ => None,
        },
        spread: Vec::new(),
        wide_whole_stripes: o.wide_whole_stripes,
        duration_s: o.duration_s,
        utilization: o.utilization,
        mean_on_s: o.mean_on_s,
        model: o.model.clone(),
    };
    for seed in c.seed..c.seed + c.seeds {
        let mut progress = |p: &Point| {
            step(&format!(
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
        let points = if o.figures.is_empty() {
            Vec::new()
        } else {
            super::run(o, seed, &mut progress).map_err(|e| format!("seed {seed}: {e}"))?
        };
        let mut figures = super::figures(&points);
        if c.fig8 || c.fig10 {
            let source = match &c.skew {
                SkewStreams::Trace(s) => Source {
                    names: s.names.clone(),
                    open: s.open.clone(),
                    description: s.description.clone(),
                },
                SkewStreams::Table2 {
                    websearch,
                    time_unit,
                } => table2_source(websearch.as_ref(), *time_unit, o.duration_s, seed)?,
                SkewStreams::Fragments(f) => f.source(o.duration_s, seed),
            };
            report.skew_description = Some(source.description.clone());
            for (wanted, ten) in [(c.fig8, false), (c.fig10, true)] {
                if !wanted {
                    continue;
                }
                let r = super::run_skew(
                    &source,
                    o.duration_s,
                    o.wide_whole_stripes,
                    seed,
                    ten,
                    c.skew_device.as_ref(),
                )
                .map_err(|e| format!("seed {seed}: Fig {}: {e}", if ten { "10" } else { "8" }))?;
                step(&format!(
                    "seed {seed}: Fig {}: {} streams ({} dropped as idle) on {}, partition imbalance {:.2} %; wide/narrow geometric mean {:.3} (mean), {:.3} (p95)",
                    r.figure,
                    r.streams.len(),
                    r.dropped.len(),
                    report
                        .skew_arrays
                        .as_deref()
                        .unwrap_or("4 RAID-5 4+p arrays of fujitsu-maj3182mc"),
                    r.imbalance * 100.0,
                    r.geomean_ratio_mean,
                    r.geomean_ratio_p95
                ));
                figures.extend(super::skew_figures(&r));
                report.skews.push((seed, r));
            }
        }
        if c.table3 {
            let rows = super::run_table3(o.duration_s, seed, c.table3_channel_mb_per_s)
                .map_err(|e| format!("seed {seed}: Table 3: {e}"))?;
            step(&format!("seed {seed}: Table 3 done"));
            figures.extend(super::table3_figures(&rows));
            report.tables.push((seed, rows));
        }
        report.runs.push((seed, figures));
        report.points.push((seed, points));
    }
    report.spread = spread::spread(&report.runs);
    Ok(report)
}

impl SeedsReport {
    /// The report as `--json` prints it (and `spread.json` holds).
    pub fn json(&self) -> serde_json::Value {
        let seeds: Vec<u64> = self.runs.iter().map(|(s, _)| *s).collect();
        json!({
            "seeds": seeds,
            "wide_layout": if self.wide_whole_stripes { "stripes" } else { "units" },
            "duration_s": self.duration_s,
            "utilization": self.utilization,
            "mean_on_s": self.mean_on_s,
            "model": self.model,
            "skew_arrays": self.skew_arrays,
            "skew_streams": self.skew_description,
            "fragments": self.fragments,
            "spread": self.spread,
            "runs": self.points.iter().map(|(s, p)| json!({"seed": s, "points": p})).collect::<Vec<_>>(),
            "skew": self.skews.iter().map(|(s, r)| json!({"seed": s, "report": r})).collect::<Vec<_>>(),
            "table3": self.tables.iter().map(|(s, r)| json!({"seed": s, "rows": r})).collect::<Vec<_>>(),
        })
    }
}

/// Opens trace files (merged in time order) as the skew figures' records.
fn open_records(inputs: &[TraceInput]) -> Result<Box<dyn RecordReader>, String> {
    let mut readers = Vec::new();
    for input in inputs {
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

/// Figures 8–10's streams from the volumes of `inputs` (numbered in order of appearance).
pub fn trace_source(inputs: Vec<TraceInput>) -> Result<Source, String> {
    // A first pass for the volume names.
    let mut reader = open_records(&inputs)?;
    while reader.next_record().map_err(|e| e.to_string())?.is_some() {}
    let names: Vec<String> = reader
        .volumes()
        .names()
        .map(|(_, n)| n.to_string())
        .collect();
    if names.is_empty() {
        return Err("--trace: no requests".into());
    }
    let description = format!(
        "{} ({} volumes, each a stream)",
        inputs
            .iter()
            .map(|i| i.file.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        names.len()
    );
    let open =
        Arc::new(move || -> Result<Records, String> { Ok(records_of(open_records(&inputs)?)) });
    Ok(Source {
        description,
        names,
        open,
    })
}

/// Table 2's streams for one seed (WebSearch looped from `websearch` when given).
pub fn table2_source(
    websearch: Option<&PathBuf>,
    time_unit: Option<cordillera_trace::TimeUnit>,
    duration_s: f64,
    seed: u64,
) -> Result<Source, String> {
    let fragment = match websearch {
        None => None,
        Some(path) => {
            let input = TraceInput {
                time_unit: time_unit.or(Some(cordillera_trace::TimeUnit::Ns)),
                ..TraceInput::file(path)
            };
            let name = path.display().to_string();
            let open = Arc::new(move || -> Result<Records, String> {
                Ok(records_of(open_records(std::slice::from_ref(&input))?))
            });
            Some(skew::Fragment::new(&name, open)?)
        }
    };
    Ok(skew::table2(fragment, duration_s, seed))
}
