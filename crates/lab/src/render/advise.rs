//! `cordillera advise`'s report as a person reads it: the verdicts in text, and the folder with
//! `report.html` (self-contained), `report.json` and the figures.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::format::duration;
use crate::advise::{Outcome, Report};
use crate::spread::number;

fn mark(o: Outcome) -> &'static str {
    match o {
        Outcome::Applies => "APPLIES",
        Outcome::DoesNotApply => "DOES NOT APPLY",
        Outcome::CannotJudge => "CANNOT JUDGE",
    }
}

/// The characterization in a few lines, then one block per verdict.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let c = &r.characterization;
    let _ = writeln!(s, "Cordillera advise: {}", r.source);
    let _ = writeln!(
        s,
        "  {} requests on {} volume(s) over {}; {} reads; mean request {}; working set {:.2} GB",
        c.records,
        c.volumes,
        duration(c.duration_s),
        c.read_pct.map_or("-".into(), |p| format!("{p:.0} %")),
        c.mean_request_bytes
            .map_or("-".into(), |m| format!("{:.1} KiB", m / 1024.0)),
        c.working_set_bytes as f64 / 1e9
    );
    match c.peak_to_mean() {
        Some(p) => {
            let _ = writeln!(
                s,
                "  busiest {} {}× the mean rate; {} peak episode(s) found",
                c.rate_window(),
                number(p),
                c.peaks.episodes.len()
            );
        }
        None if c.has_time => {
            let _ = writeln!(
                s,
                "  shorter than one rate window ({}): no peak-to-mean ratio; {} peak episode(s) found",
                c.rate_window(),
                c.peaks.episodes.len()
            );
        }
        None => {}
    }
    if c.skipped_lines > 0 {
        let _ = writeln!(s, "  {} malformed line(s) skipped", c.skipped_lines);
    }
    for note in &c.reading_notes {
        let _ = writeln!(s, "  {note}");
    }
    s.push_str(&device_text(&r.device));
    if let Some(m) = &r.miss_ratio_curve {
        s.push_str(&mrc_text(m));
    }
    let _ = writeln!(
        s,
        "  seeds {}{}",
        r.seeds
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if r.quick { " (--quick)" } else { "" }
    );
    for v in &r.verdicts {
        let _ = writeln!(
            s,
            "\n{} — {} ({})\n  {}",
            v.mechanism,
            mark(v.outcome),
            v.paper,
            v.summary
        );
        if let Some(c) = &v.confidence {
            let _ = writeln!(
                s,
                "  {}: {}",
                if c.borderline {
                    "BORDERLINE"
                } else {
                    "confidence"
                },
                c.basis
            );
        }
        if !v.next_step.is_empty() {
            let _ = writeln!(s, "  next: {}", v.next_step);
        }
        for w in &v.why {
            let _ = writeln!(s, "  · {w}");
        }
        for a in &v.alternatives {
            let _ = writeln!(s, "  ∘ {a}");
        }
        for f in &v.figures {
            let _ = writeln!(
                s,
                "    {}: {}{}{}",
                f.label,
                if f.values.len() > 1 {
                    format!(
                        "{} ({}–{}, sd {})",
                        number(f.mean),
                        number(f.min),
                        number(f.max),
                        number(f.std_dev)
                    )
                } else {
                    number(f.mean)
                },
                if f.unit == "×" {
                    f.unit.to_owned()
                } else {
                    format!(" {}", f.unit)
                },
                if f.paper.is_empty() {
                    String::new()
                } else {
                    format!("   [paper: {}]", f.paper)
                }
            );
        }
        for cmd in &v.commands {
            let _ = writeln!(s, "    $ {cmd}");
        }
    }
    s
}

/// The device the verdicts are judged on, how it was chosen, and the trace's recorded latency
/// beside the simulated one on the same requests.
pub fn device_text(d: &crate::devices::DeviceChoice) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "  judged on {} — {}", d.description, d.reason);
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{} ms", number(v)));
    let row = |l: &crate::devices::Latencies| {
        format!(
            "reads mean {} (median {}), writes mean {} (median {}) over {} requests",
            ms(l.read_mean_ms),
            ms(l.read_p50_ms),
            ms(l.write_mean_ms),
            ms(l.write_p50_ms),
            l.requests
        )
    };
    if let Some(rec) = &d.recorded {
        let _ = writeln!(s, "  recorded by the trace:  {}", row(rec));
    }
    if let Some(sim) = &d.simulated {
        let _ = writeln!(s, "  simulated on {}: {}", d.device, row(sim));
    }
    for f in &d.fit {
        let _ = writeln!(
            s,
            "    fit: {:<9} simulated mean {} ({}× the recorded)",
            f.device,
            ms(Some(f.simulated_mean_ms)),
            number(f.ratio)
        );
    }
    s
}

/// Volumes the report's tables show: the busiest by requests; the rest are summarised (and
/// every one is in `volumes.csv`).
pub const VOLUMES_SHOWN: usize = 20;

/// The `n` busiest volumes by requests, and how many others there are with their requests.
pub fn busiest_volumes(
    c: &crate::advise::Characterization,
    n: usize,
) -> (
    Vec<&cordillera_trace::stats::VolumeStats>,
    Option<(usize, u64)>,
) {
    let mut all: Vec<&cordillera_trace::stats::VolumeStats> = c.stats.volumes.iter().collect();
    all.sort_by(|a, b| b.records.cmp(&a.records).then(a.volume.cmp(&b.volume)));
    let rest: Vec<_> = all.split_off(n.min(all.len()));
    let summary = (!rest.is_empty()).then(|| (rest.len(), rest.iter().map(|v| v.records).sum()));
    (all, summary)
}

/// The miss-ratio curve in one line per size.
fn mrc_text(m: &crate::mrc::MissRatioCurve) -> String {
    let mut s = format!(
        "  miss-ratio curve (LRU, {}; {} read block accesses, {} cold):
   ",
        m.method, m.read_block_accesses, m.cold_read_misses
    );
    for p in &m.points {
        let _ = write!(
            s,
            " {}: {:.1} %",
            super::format::bytes(p.cache_bytes),
            p.read_miss_ratio * 100.0
        );
    }
    s.push('\n');
    s
}

/// Every table of the report as CSV: volumes, verdicts, figures, the miss-ratio curve, the
/// device fit.
fn write_csvs(dir: &Path, r: &Report) -> Result<()> {
    use super::write_csv;
    let c = &r.characterization;
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
    write_csv(
        dir,
        "volumes.csv",
        &[
            "volume",
            "requests",
            "reads",
            "writes",
            "read_bytes",
            "write_bytes",
            "span_s",
            "mean_rate_per_s",
            "peak_rate_per_s",
            "wss_bytes",
            "mean_request_bytes",
        ],
        c.stats.volumes.iter().chain([&c.stats.total]).map(|v| {
            vec![
                v.volume.clone(),
                v.records.to_string(),
                v.reads.to_string(),
                v.writes.to_string(),
                v.read_bytes.to_string(),
                v.write_bytes.to_string(),
                v.span_s.to_string(),
                opt(v.mean_rate_per_s),
                v.peak_rate_per_s.to_string(),
                v.wss_bytes.to_string(),
                opt(v.mean_request_bytes),
            ]
        }),
    )?;
    write_csv(
        dir,
        "verdicts.csv",
        &["mechanism", "outcome", "borderline", "summary", "next_step"],
        r.verdicts.iter().map(|v| {
            vec![
                v.mechanism.to_owned(),
                v.outcome.text().to_owned(),
                v.confidence
                    .as_ref()
                    .map_or(String::new(), |c| c.borderline.to_string()),
                v.summary.clone(),
                v.next_step.clone(),
            ]
        }),
    )?;
    write_csv(
        dir,
        "figures.csv",
        &[
            "mechanism",
            "key",
            "label",
            "unit",
            "mean",
            "min",
            "max",
            "sd",
            "runs",
            "paper",
        ],
        r.verdicts.iter().flat_map(|v| {
            v.figures.iter().map(move |f| {
                vec![
                    v.mechanism.to_owned(),
                    f.key.clone(),
                    f.label.clone(),
                    f.unit.to_owned(),
                    f.mean.to_string(),
                    f.min.to_string(),
                    f.max.to_string(),
                    f.std_dev.to_string(),
                    f.values.len().to_string(),
                    f.paper.clone(),
                ]
            })
        }),
    )?;
    if let Some(m) = &r.miss_ratio_curve {
        write_csv(
            dir,
            "miss_ratio_curve.csv",
            &["cache_bytes", "read_hits", "read_miss_ratio"],
            m.points.iter().map(|p| {
                vec![
                    p.cache_bytes.to_string(),
                    p.read_hits.to_string(),
                    p.read_miss_ratio.to_string(),
                ]
            }),
        )?;
    }
    if r.device.fit.is_empty() {
        return Ok(());
    }
    write_csv(
        dir,
        "device_fit.csv",
        &["device", "simulated_mean_ms", "over_recorded"],
        r.device.fit.iter().map(|f| {
            vec![
                f.device.clone(),
                f.simulated_mean_ms.to_string(),
                f.ratio.to_string(),
            ]
        }),
    )?;
    Ok(())
}

/// `report.json` and `report.html` (with its figures inline) in `dir`.
pub fn write_outputs(dir: &Path, r: &Report) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = super::writer(dir);
    write("report.json", serde_json::to_string_pretty(r)?)?;
    write("report.html", super::advise_html::html_in(dir, r)?)?;
    write_csvs(dir, r)?;
    Ok(())
}

/// Whether a file name is one an advise report writes.
fn is_report_file(name: &str) -> bool {
    matches!(name, "report.html" | "report.json" | "workload.cdt")
        || name.ends_with(".svg")
        || name.ends_with(".csv")
}

/// Checks `--out` before any work: a folder that can be written, empty unless `force`, in
/// which case the earlier report's files are removed first (and nothing else).
pub fn prepare_out(dir: &Path, force: bool) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("--out {}: exists and is not a folder", dir.display());
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--out {}: creating it", dir.display()))?;
    let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(dir)
        .with_context(|| format!("--out {}: reading it", dir.display()))?
        .collect::<std::io::Result<_>>()?;
    if !entries.is_empty() && !force {
        anyhow::bail!(
            "--out {}: not empty ({} entries, an earlier report?); pass --force to replace the earlier report's files, or name an empty folder",
            dir.display(),
            entries.len()
        );
    }
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let trace_dir = name.starts_with("trace-") && path.is_dir();
        if trace_dir {
            prepare_out(&path, true)?;
            // Left in place only when it holds files that are not a report's.
            let _ = std::fs::remove_dir(&path);
        } else if is_report_file(&name) && path.is_file() {
            std::fs::remove_file(&path)
                .with_context(|| format!("--force: removing {}", path.display()))?;
        }
    }
    // Writable now, not after the analysis.
    let probe = dir.join(".cordillera-write-check");
    std::fs::write(&probe, b"")
        .with_context(|| format!("--out {}: cannot write there", dir.display()))?;
    std::fs::remove_file(&probe).ok();
    Ok(())
}
