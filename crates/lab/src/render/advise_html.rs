//! `report.html`: one self-contained page (styles and figures inline, no script, nothing
//! fetched) — the verdicts first, then the characterization's and each lab's figures, tables
//! with the paper's value beside ours, and the commands that reproduce every number. Each
//! figure is also written beside it as an SVG file.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use super::plots::{bars, chart, ranged_bars, Bar, Series};
use crate::advise::{Outcome, Report, Verdict};
use crate::spread::number;

/// Text safe inside HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#1d2733;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:2em;border-bottom:2px solid #d8dee6;padding-bottom:.2em}
.sub{color:#5a6878}
.verdicts{display:grid;grid-template-columns:repeat(auto-fit,minmax(240px,1fr));gap:1em;margin:1.5em 0}
.card{border:1px solid #d8dee6;border-radius:8px;padding:.8em 1em;background:#fbfcfd}
.card h3{margin:.1em 0 .4em 0;font-size:1.1em}
.badge{display:inline-block;font-size:.8em;font-weight:600;padding:.1em .6em;border-radius:1em;color:#fff}
.applies{background:#2e7d32}.does-not-apply{background:#8a6d00}.cannot-judge{background:#6b7785}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}
th,td{border:1px solid #d8dee6;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#eef2f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
ul.why{margin:.4em 0 .6em 1.2em;padding:0}
pre{background:#f1f4f7;padding:.6em .8em;border-radius:6px;overflow-x:auto;font-size:.85em}
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #e3e8ee;border-radius:6px}
figcaption{color:#5a6878;font-size:.9em}
";

fn outcome_class(o: Outcome) -> &'static str {
    match o {
        Outcome::Applies => "applies",
        Outcome::DoesNotApply => "does-not-apply",
        Outcome::CannotJudge => "cannot-judge",
    }
}

/// A figure: drawn to `dir/name` by `draw`, then inlined. A figure that cannot be drawn (no
/// data) is left out with its reason.
fn figure(dir: &Path, name: &str, caption: &str, draw: impl FnOnce(&Path) -> Result<()>) -> String {
    let path = dir.join(name);
    match draw(&path).and_then(|_| Ok(std::fs::read_to_string(&path)?)) {
        Ok(svg) => {
            // The SVG's own XML prologue has no place inside HTML.
            let body = svg
                .find("<svg")
                .map_or(svg.as_str(), |i| &svg[i..])
                .to_owned();
            format!(
                "<figure>{body}<figcaption>{} (<code>{}</code>)</figcaption></figure>\n",
                escape(caption),
                escape(name)
            )
        }
        Err(e) => format!(
            "<p class=\"sub\">{}: not drawn ({})</p>\n",
            escape(caption),
            escape(&e.to_string())
        ),
    }
}

fn verdict_card(v: &Verdict) -> String {
    format!(
        "<div class=\"card\"><h3>{}</h3><span class=\"badge {}\">{}</span><p>{}</p></div>\n",
        escape(v.mechanism),
        outcome_class(v.outcome),
        escape(v.outcome.text()),
        escape(&v.summary)
    )
}

fn verdict_section(v: &Verdict) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<h3>{} <span class=\"badge {}\">{}</span></h3><p class=\"sub\">{}</p><p>{}</p>",
        escape(v.mechanism),
        outcome_class(v.outcome),
        escape(v.outcome.text()),
        escape(v.paper),
        escape(&v.summary)
    );
    if let Some(c) = &v.confidence {
        let _ = write!(
            s,
            "<p><b>{}</b>: {}</p>",
            if c.borderline {
                "Borderline"
            } else {
                "Confidence"
            },
            escape(&c.basis)
        );
    }
    if !v.next_step.is_empty() {
        let _ = write!(s, "<p><b>Next</b>: {}</p>", escape(&v.next_step));
    }
    if !v.why.is_empty() {
        s.push_str("<ul class=\"why\">");
        for w in &v.why {
            let _ = write!(s, "<li>{}</li>", escape(w));
        }
        s.push_str("</ul>");
    }
    if !v.alternatives.is_empty() {
        s.push_str("<p class=\"sub\">Against the alternatives:</p><ul class=\"why\">");
        for a in &v.alternatives {
            let _ = write!(s, "<li>{}</li>", escape(a));
        }
        s.push_str("</ul>");
    }
    if !v.figures.is_empty() {
        s.push_str("<table><tr><th>figure</th><th>ours (mean)</th><th>min – max</th><th>sd</th><th>seeds</th><th>the paper</th></tr>");
        for f in &v.figures {
            let _ = write!(
                s,
                "<tr><td>{}</td><td class=\"num\">{} {}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                escape(&f.label),
                number(f.mean),
                escape(f.unit),
                if f.values.len() > 1 {
                    format!("{} – {}", number(f.min), number(f.max))
                } else {
                    String::new()
                },
                if f.values.len() > 1 { number(f.std_dev) } else { String::new() },
                f.values.len(),
                escape(&f.paper)
            );
        }
        s.push_str("</table>");
    }
    if !v.commands.is_empty() {
        s.push_str("<p class=\"sub\">Reproduce:</p><pre>");
        for c in &v.commands {
            let _ = writeln!(s, "$ {}", escape(c));
        }
        s.push_str("</pre>");
    }
    s
}

/// The page; its figures are written into `dir` as SVG files as well.
/// The workload's table: the busiest volumes, the rest summed up, the total.
fn workload_table(c: &crate::advise::Characterization) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<h2>The workload</h2>\n<table><tr><th>volume</th><th>requests</th><th>reads</th><th>mean request</th><th>mean rate</th><th>busiest {}</th><th>working set</th></tr>",
        escape(&c.rate_window())
    );
    let (top, rest) = super::advise::busiest_volumes(c, super::advise::VOLUMES_SHOWN);
    for v in top.into_iter().chain(std::iter::once(&c.stats.total)) {
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}/s</td><td class=\"num\">{:.2} GB</td></tr>",
            escape(&v.volume),
            v.records,
            if v.records > 0 { format!("{:.0} %", v.reads as f64 * 100.0 / v.records as f64) } else { "-".into() },
            v.mean_request_bytes.map_or("-".into(), |m| format!("{:.1} KiB", m / 1024.0)),
            v.mean_rate_per_s.map_or("-".into(), |m| format!("{}/s", number(m))),
            number(v.peak_rate_per_s),
            v.wss_bytes as f64 / 1e9
        );
    }
    if let Some(rest) = rest {
        let _ = write!(
            s,
            "<tr><td colspan=\"7\">… and {} more volume(s) with {} requests in all (every volume: volumes.csv)</td></tr>",
            rest.0, rest.1
        );
    }
    s.push_str("</table>\n");
    s
}

/// The miss-ratio curve: a figure and its table.
fn mrc_section(dir: &Path, m: &crate::mrc::MissRatioCurve) -> String {
    let mut s = format!(
        "<h2>Miss-ratio curve</h2><p class=\"sub\">The read miss ratio of an LRU cache of 4 KiB blocks at each size ({}): {} read block accesses, {} of them first accesses (misses at any size); working set {}. Table: miss_ratio_curve.csv.</p>",
        escape(m.method),
        m.read_block_accesses,
        m.cold_read_misses,
        super::format::bytes(m.working_set_bytes)
    );
    let points: Vec<(f64, f64)> = m
        .points
        .iter()
        .map(|p| {
            (
                p.cache_bytes as f64 / (1 << 20) as f64,
                p.read_miss_ratio * 100.0,
            )
        })
        .collect();
    if points.len() >= 2 {
        s.push_str(&figure(
            dir,
            "miss_ratio_curve.svg",
            "Read miss ratio by cache size (LRU, exact)",
            |path| {
                super::plots::chart_xy(
                    path,
                    "Miss-ratio curve",
                    "cache size, MiB",
                    "read miss ratio, %",
                    true,
                    false,
                    &[Series {
                        name: "LRU".into(),
                        points,
                    }],
                )
            },
        ));
    }
    s.push_str("<table><tr><th>cache</th><th>read hits</th><th>read miss ratio</th></tr>");
    for p in &m.points {
        let _ = write!(
            s,
            "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.2} %</td></tr>",
            super::format::bytes(p.cache_bytes),
            p.read_hits,
            p.read_miss_ratio * 100.0
        );
    }
    s.push_str("</table>\n");
    s
}

/// Recorded against simulated latency on the trace's first requests, and the fit's rows.
fn device_table(d: &crate::devices::DeviceChoice) -> String {
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| format!("{} ms", number(v)));
    let mut s = String::new();
    if d.recorded.is_none() && d.simulated.is_none() {
        return s;
    }
    s.push_str("<table><tr><th>latency of the trace's first requests</th><th>requests</th><th>read mean</th><th>read median</th><th>write mean</th><th>write median</th></tr>");
    for (name, l) in [
        ("recorded by the trace", &d.recorded),
        (&format!("simulated on {}", d.device) as &str, &d.simulated),
    ] {
        if let Some(l) = l {
            let _ = write!(
                s,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                escape(name),
                l.requests,
                ms(l.read_mean_ms),
                ms(l.read_p50_ms),
                ms(l.write_mean_ms),
                ms(l.write_p50_ms)
            );
        }
    }
    for f in &d.fit {
        let _ = write!(
            s,
            "<tr><td>fit: {}</td><td></td><td class=\"num\" colspan=\"4\">simulated mean {} = {}× the recorded</td></tr>",
            escape(&f.device),
            ms(Some(f.simulated_mean_ms)),
            number(f.ratio)
        );
    }
    s.push_str("</table>\n");
    s
}

pub fn html_in(dir: &Path, r: &Report) -> Result<String> {
    let c = &r.characterization;
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Cordillera advise: {}</title><style>{STYLE}</style></head><body>\n",
        escape(&r.source)
    );
    let _ = writeln!(
        s,
        "<h1>What each mechanism would do for this workload</h1><p class=\"sub\">{} — {} requests on {} volume(s) over {}; seeds {}{}</p>",
        escape(&r.source),
        c.records,
        c.volumes,
        super::format::duration(c.duration_s),
        r.seeds.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "),
        if r.quick { " (quick)" } else { "" }
    );
    let _ = writeln!(
        s,
        "<p class=\"sub\">Judged on {} — {}</p>",
        escape(&r.device.description),
        escape(&r.device.reason)
    );
    for note in &c.reading_notes {
        let _ = writeln!(s, "<p class=\"sub\">{}</p>", escape(note));
    }
    s.push_str(&device_table(&r.device));
    s.push_str("<div class=\"verdicts\">");
    for v in &r.verdicts {
        s.push_str(&verdict_card(v));
    }
    s.push_str("</div>\n");

    s.push_str(&workload_table(c));
    if let Some(m) = &r.miss_ratio_curve {
        s.push_str(&mrc_section(dir, m));
    }
    if let Some(p) = &c.profile {
        let points: Vec<(f64, f64)> = p
            .buckets
            .iter()
            .map(|b| (b.start_s / 3600.0, b.iops))
            .collect();
        if points.len() >= 2 {
            s.push_str(&figure(
                dir,
                "load_by_hour.svg",
                "Requests per second, hour by hour",
                |path| {
                    chart(
                        path,
                        "Load over the trace",
                        "hours from the start",
                        "requests per second",
                        false,
                        &[Series {
                            name: "all volumes".into(),
                            points,
                        }],
                    )
                },
            ));
        }
        if c.duration_s >= 86_400.0 && !p.hours_of_day.is_empty() {
            let points: Vec<(f64, f64)> = p
                .hours_of_day
                .iter()
                .map(|h| (h.hour as f64, h.normalized * 100.0))
                .collect();
            s.push_str(&figure(dir, "load_by_hour_of_day.svg", "Bytes per second by hour of day, % of the busiest hour (the diurnal swing gears use)", |path| {
                chart(path, "Load by hour of day", "hour of day", "% of the busiest hour", false, &[Series { name: "bytes/s".into(), points }])
            }));
        }
    }
    let vols: Vec<String> = c
        .reaccess
        .volumes
        .iter()
        .map(|v| v.volume.clone())
        .collect();
    if !vols.is_empty() && c.reaccess.has_time {
        let class = |name: &str| -> Vec<Option<f64>> {
            c.reaccess
                .volumes
                .iter()
                .map(|v| {
                    v.classes
                        .iter()
                        .find(|k| k.class == name)
                        .and_then(|k| k.block_pct)
                })
                .collect()
        };
        let series = vec![
            ("hourly".to_owned(), class("hourly")),
            ("daily".to_owned(), class("daily")),
            ("other".to_owned(), class("other")),
        ];
        s.push_str(&figure(dir, "reaccess_classes.svg", "Reaccessed blocks by class (Bonfire Figure 1a): what the warm-up algorithm is chosen from", |path| {
            bars(path, "Reaccess classes", "% of reaccessed blocks", &vols, &series)
        }));
    }

    s.push_str("<h2>The verdicts, with the figures behind them</h2>\n");
    for v in &r.verdicts {
        s.push_str(&verdict_section(v));
        match v.mechanism {
            "peak off-load" => s.push_str(&offload_figure(dir, r)),
            "gears" => s.push_str(&gears_figure(dir, r)),
            "warm-up" => s.push_str(&warmup_figure(dir, r)),
            _ => {}
        }
    }
    s.push_str("<h2>How this was measured</h2><p>Every figure above was measured on this trace by the lab named beside it, with the same core code the runtime runs, on the deterministic simulator's disk models. Seeded figures (warm-up's, the striping simulation's) give their mean, range and standard deviation over the seeds; peak off-load is replayed once, since a fixed trace replays the same whatever the simulator's seed, and its spread is across the peaks; the paper's value is quoted as the paper states it. <code>report.json</code> holds everything on this page and the labs' full reports.</p>");
    let _ = write!(
        s,
        "<p class=\"sub\">Time taken: {}.</p>",
        r.timings
            .iter()
            .map(|(k, t)| format!("{} {:.1} s", escape(k), t))
            .collect::<Vec<_>>()
            .join(", ")
    );
    s.push_str("</body></html>\n");
    Ok(s)
}

fn offload_figure(dir: &Path, r: &Report) -> String {
    let reports = &r.details.everest;
    let Some(first) = reports.first() else {
        return String::new();
    };
    let groups: Vec<String> = first
        .episodes
        .iter()
        .map(|e| format!("peak {}", e.rank))
        .collect();
    if groups.is_empty() {
        return String::new();
    }
    let series: Vec<(String, Vec<Option<Bar>>)> = ["baseline", "always", "peak"]
        .iter()
        .map(|&config| {
            let bars = (0..groups.len())
                .map(|i| {
                    let values: Vec<f64> = reports
                        .iter()
                        .filter_map(|rep| rep.episodes.get(i))
                        .filter_map(|e| match config {
                            "baseline" => e.configs.baseline.mean_ms,
                            "always" => e.configs.always.mean_ms,
                            _ => e.configs.peak.mean_ms,
                        })
                        .collect();
                    (!values.is_empty()).then(|| Bar {
                        value: values.iter().sum::<f64>() / values.len() as f64,
                        low: values.iter().copied().fold(f64::INFINITY, f64::min),
                        high: values.iter().copied().fold(0.0, f64::max),
                    })
                })
                .collect();
            (
                match config {
                    "baseline" => "no off-load".to_owned(),
                    "always" => "always off-load".to_owned(),
                    _ => "peak off-load".to_owned(),
                },
                bars,
            )
        })
        .collect();
    figure(dir, "offload_peaks.svg", "Mean response time in each peak, without and with off-loading (one replay: a fixed trace replays the same whatever the simulator's seed; Everest Figure 5)", |path| {
        ranged_bars(path, "Mean response in the peaks", "mean response, ms", true, &groups, &series)
    })
}

fn gears_figure(dir: &Path, r: &Report) -> String {
    let Some(s) = r.details.sierra.as_ref().and_then(|x| x.schedules.first()) else {
        return String::new();
    };
    if s.hours.len() < 2 {
        return String::new();
    }
    let load: Vec<(f64, f64)> = s
        .hours
        .iter()
        .enumerate()
        .map(|(i, h)| (i as f64, h.peak_servers))
        .collect();
    let mut series = vec![Series {
        name: "load (servers, hour's peak)".into(),
        points: load,
    }];
    for (k, g) in s.g_mins.iter().enumerate() {
        let per_gear = s.chunk_servers as f64 / 3.0;
        series.push(Series {
            name: format!("servers on, g_min = {g}"),
            points: s
                .hours
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    (
                        i as f64,
                        h.gears.get(k).copied().unwrap_or(0) as f64 * per_gear,
                    )
                })
                .collect(),
        });
    }
    figure(
        dir,
        "gears_by_hour.svg",
        "The load and the servers the gears keep on, hour by hour (Sierra Figure 10)",
        |path| {
            chart(
                path,
                "Load and gears",
                "hours from the start",
                "chunk servers",
                false,
                &series,
            )
        },
    )
}

fn warmup_figure(dir: &Path, r: &Report) -> String {
    let Some(b) = &r.details.bonfire else {
        return String::new();
    };
    let Some(f) = b.figures.first() else {
        return String::new();
    };
    let mut names = vec!["always-warm".to_owned(), "cold".to_owned()];
    names.extend(f.algorithms.iter().map(|a| a.algorithm.to_string()));
    let interval_h = b.interval_s / 3600.0;
    let series: Vec<Series> = names
        .iter()
        .enumerate()
        .filter_map(|(k, name)| {
            let points: Vec<(f64, f64)> = f
                .hit_rates
                .iter()
                .enumerate()
                .filter_map(|(i, row)| {
                    row.get(k)
                        .copied()
                        .flatten()
                        .map(|h| (i as f64 * interval_h, h * 100.0))
                })
                .collect();
            (!points.is_empty()).then(|| Series {
                name: name.clone(),
                points,
            })
        })
        .collect();
    if series.is_empty() {
        return String::new();
    }
    figure(
        dir,
        "warmup_hit_rate.svg",
        &format!("Read hit rate of the new caches on {} day {} at the middle setting (Bonfire Figure 6's day)", f.volume, f.day),
        |path| chart(path, "Hit rate after the new cache starts", "hours into the day", "read hit rate, %", false, &series),
    )
}
