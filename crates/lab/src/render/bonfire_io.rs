//! `lab bonfire`'s figures over I/Os: the Zipf workload (§6.1, Figures 10–11) and the trace
//! replayed to the new-cache day (§6.2, Figures 12–15): text, CSV and SVG.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use super::format::{cell, opt};
use super::plots::{chart, Series};
use super::write_csv;
use crate::bonfire::replay::{ReplayReport, ReplayVolume};
use crate::bonfire::ZipfReport;
use crate::spread::Figure;

/// "1.23 M I/O" or "never".
fn ios(io: Option<u64>) -> String {
    io.map_or("never".to_owned(), |io| {
        format!("{:.2} M I/O", io as f64 / 1e6)
    })
}

pub fn zipf_text(z: &ZipfReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nBonfire §6.1 (Figures 10–11): {} 4 KiB Zipf reads, α = {}, over {:.0} GiB; working set {:.2} GB; caches of {} blocks created at I/O {}; Last-K of 4 KiB blocks",
        z.requests,
        z.alpha,
        z.span_bytes as f64 / (1u64 << 30) as f64,
        z.working_set_blocks as f64 * 4096.0 / 1e9,
        z.cache_blocks,
        z.start_io
    );
    let _ = writeln!(
        s,
        "  {:<14} {:>14} {:>16} {:>16} {:>14} {:>16}",
        "scheme",
        "pre-loaded",
        "hit rate, half 2",
        "hit rate at end",
        "converged at",
        "read latency"
    );
    for x in &z.series {
        let _ = writeln!(
            s,
            "  {:<14} {:>14} {:>14} % {:>14} % {:>14} {:>13} ms",
            x.scheme,
            x.preload_blocks,
            opt(x.hit_rate.map(|h| h * 100.0), 1),
            opt(x.final_hit_rate.map(|h| h * 100.0), 1),
            ios(x.converge_io),
            opt(x.mean_read_latency_ms, 3),
        );
    }
    let _ = writeln!(
        s,
        "  (converged: Equation 1 with Th_V {} and Th_N {}; read latency: the second half replayed one request at a time, a hit {} µs, a miss read from the {} model)",
        z.th_v, z.th_n, z.hit_us, z.disk
    );
    let _ = writeln!(
        s,
        "  the paper (Figure 11): Bonfire equal to always-warm, \"averaging at 0.5 ms\", after the new cache starts; cold \"averages at 2.6 ms\""
    );
    s
}

pub fn replay_text(r: &ReplayReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nBonfire §6.2 (Figures 12–15) on {}: replayed from day 1, new caches at the start of day {} or a volume's last (cold, and Bonfire pre-loaded with Last-K of 4 KiB blocks); caches {} % and warm-up {} % of each volume's working set; read hit rate and latency over the I/Os of that day and the day before",
        r.source, r.new_cache_day, r.cache_pct, r.warmup_pct,
    );
    for v in &r.volumes {
        let _ = writeln!(
            s,
            "  {}: working set {} blocks, cache {} blocks, {} pre-loaded; {} I/Os over days {}–{}, new caches at I/O {}",
            v.volume,
            v.working_set_blocks,
            v.cache_blocks,
            v.preload_blocks,
            v.ios,
            v.new_cache_day - 1,
            v.new_cache_day,
            v.start_io
        );
        let _ = writeln!(
            s,
            "    {:<12} {:>18} {:>20} {:>24}",
            "scheme", "hit rate, day", "read latency, day", "converged after T"
        );
        for x in &v.series {
            let _ = writeln!(
                s,
                "    {:<12} {:>16} % {:>17} ms {:>24}",
                x.scheme,
                opt(x.hit_rate.map(|h| h * 100.0), 1),
                opt(x.mean_read_latency_ms, 3),
                if x.scheme == "always-warm" {
                    "-".to_owned()
                } else {
                    ios(x.converge_after_ios)
                }
            );
        }
        let _ = writeln!(
            s,
            "    Bonfire against cold: {}",
            v.improvement_pct.map_or(
                "nothing to compare (cold converged at once, or one of them never did)".to_owned(),
                |p| format!("converges {p:.0} % sooner")
            )
        );
    }
    for (v, why) in &r.skipped {
        let _ = writeln!(s, "  {v}: not replayed: {why}");
    }
    let _ = writeln!(
        s,
        "  (converged: Equation 1 with Th_V {} and Th_N {}; a hit {} µs, a miss read from the {} model)",
        r.th_v, r.th_n, r.hit_us, r.disk
    );
    let _ = writeln!(
        s,
        "  the paper: proj1 (hourly reaccesses) — cold converges \"around 2.7M I/Os after the new cache starts\", Bonfire \"around 1.1M I/Os after\" (\"a 59% improvement\"); web2 (daily reaccesses) — Bonfire \"converges with always-warm after 0.2M I/Os\", cold's hit rate \"stays around zero\", cold's read latency \"stays around 0.6 ms\""
    );
    s
}

/// Figure 10's hit rates and Figure 11's latencies: `fig10_zipf.csv` (both per interval),
/// `fig10_zipf.svg`, `fig11_zipf_latency.svg`.
pub fn write_zipf(dir: &Path, z: &ZipfReport) -> Result<()> {
    let io = |i: usize| z.start_io + i as u64 * z.interval_ios;
    write_csv(
        dir,
        "fig10_zipf.csv",
        &["io", "scheme", "hit_rate", "read_latency_ms"],
        z.series.iter().flat_map(|x| {
            x.hit_rates.iter().enumerate().map(move |(i, h)| {
                vec![
                    io(i).to_string(),
                    x.scheme.clone(),
                    cell(*h),
                    cell(x.read_latency_ms.get(i).copied().flatten()),
                ]
            })
        }),
    )?;
    let lines = |pick: &dyn Fn(usize, &crate::bonfire::ZipfSeries) -> Option<f64>| -> Vec<Series> {
        z.series
            .iter()
            .map(|x| Series {
                name: x.scheme.clone(),
                points: (0..x.hit_rates.len())
                    .filter_map(|i| pick(i, x).map(|y| (io(i) as f64 / 1e6, y)))
                    .collect(),
            })
            .collect()
    };
    chart(
        &dir.join("fig10_zipf.svg"),
        "Read hit rate of the Zipf workload (Bonfire Fig. 10)",
        "I/Os, millions",
        "read hit rate, %",
        false,
        &lines(&|i, x| x.hit_rates[i].map(|h| h * 100.0)),
    )?;
    chart(
        &dir.join("fig11_zipf_latency.svg"),
        "Read latency of the Zipf workload (Bonfire Fig. 11)",
        "I/Os, millions",
        "mean read latency, ms",
        false,
        &lines(&|i, x| x.read_latency_ms.get(i).copied().flatten()),
    )?;
    Ok(())
}

/// A volume name fit for a file name.
fn file_name(v: &str) -> String {
    v.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Figures 12–15: `replay.csv` (every volume, interval and scheme), and per volume
/// `replay_hit_rate_V.svg` (Figures 12, 14) and `replay_latency_V.svg` (Figures 13, 15).
pub fn write_replay(dir: &Path, r: &ReplayReport) -> Result<()> {
    write_csv(
        dir,
        "replay.csv",
        &["volume", "io", "scheme", "hit_rate", "read_latency_ms"],
        r.volumes.iter().flat_map(|v| {
            v.series.iter().flat_map(move |x| {
                x.hit_rates.iter().enumerate().map(move |(i, h)| {
                    vec![
                        v.volume.clone(),
                        (i as u64 * v.interval_ios).to_string(),
                        x.scheme.clone(),
                        cell(*h),
                        cell(x.read_latency_ms[i]),
                    ]
                })
            })
        }),
    )?;
    for v in &r.volumes {
        let lines = |pick: &dyn Fn(usize, usize) -> Option<f64>| -> Vec<Series> {
            v.series
                .iter()
                .enumerate()
                .map(|(k, x)| Series {
                    name: x.scheme.clone(),
                    points: (0..x.hit_rates.len())
                        .filter_map(|i| {
                            pick(k, i).map(|y| ((i as u64 * v.interval_ios) as f64 / 1e6, y))
                        })
                        .collect(),
                })
                .collect()
        };
        let days = format!("days {}–{}", v.new_cache_day - 1, v.new_cache_day);
        chart(
            &dir.join(format!("replay_hit_rate_{}.svg", file_name(&v.volume))),
            &format!(
                "Read hit rate, {days} of {} (Bonfire Figs. 12, 14)",
                v.volume
            ),
            &format!(
                "I/Os, millions (new caches at {:.3})",
                v.start_io as f64 / 1e6
            ),
            "read hit rate, %",
            false,
            &lines(&|k, i| v.series[k].hit_rates[i].map(|h| h * 100.0)),
        )?;
        chart(
            &dir.join(format!("replay_latency_{}.svg", file_name(&v.volume))),
            &format!(
                "Read latency, {days} of {} (Bonfire Figs. 13, 15)",
                v.volume
            ),
            &format!(
                "I/Os, millions (new caches at {:.3})",
                v.start_io as f64 / 1e6
            ),
            "mean read latency, ms",
            false,
            &lines(&|k, i| v.series[k].read_latency_ms[i]),
        )?;
    }
    Ok(())
}

/// The volume's series by scheme name.
pub(super) fn series<'a>(
    v: &'a ReplayVolume,
    scheme: &str,
) -> Option<&'a crate::bonfire::replay::ReplaySeries> {
    v.series.iter().find(|x| x.scheme == scheme)
}

/// The replay's headline figures for `--seeds` (the paper's beside the built-in trace's
/// volumes: its hourly volume stands for proj1, its nightly-job volume for web2).
pub(super) fn replay_headlines(x: &ReplayReport, beside_paper: bool) -> Vec<Figure> {
    let mut out = Vec::new();
    for v in &x.volumes {
        let paper = |hourly: &'static str, daily: &'static str| match v.volume.as_str() {
            "hourly" if beside_paper => hourly,
            "daily" if beside_paper => daily,
            _ => "",
        };
        let day = v.new_cache_day;
        for scheme in ["always-warm", "cold", "bonfire"] {
            let Some(s) = series(v, scheme) else {
                continue;
            };
            let cold = scheme == "cold";
            if let Some(h) = s.hit_rate {
                out.push(Figure::new(
                    format!("replay/{}/{scheme}/hit_rate_pct", v.volume),
                    format!("Figs 12/14: {} {scheme} hit rate, day {day}", v.volume),
                    "%",
                    h * 100.0,
                    if cold {
                        paper("", "web2: \"around zero\"")
                    } else {
                        ""
                    },
                ));
            }
            if let Some(ms) = s.mean_read_latency_ms {
                out.push(Figure::new(
                    format!("replay/{}/{scheme}/read_latency_ms", v.volume),
                    format!("Figs 13/15: {} {scheme} read latency, day {day}", v.volume),
                    "ms",
                    ms,
                    if cold {
                        paper("", "web2: \"around 0.6 ms\"")
                    } else {
                        ""
                    },
                ));
            }
            match (scheme, s.converge_after_ios) {
                ("always-warm", _) | (_, None) => {}
                (_, Some(io)) => out.push(Figure::new(
                    format!("replay/{}/{scheme}/converge_after_ios", v.volume),
                    format!("Figs 12/14: {} {scheme} converges after T", v.volume),
                    "I/Os",
                    io as f64,
                    if cold {
                        paper("proj1: \"around 2.7M\"", "")
                    } else {
                        paper("proj1: \"around 1.1M\"", "web2: \"after 0.2M\"")
                    },
                )),
            }
        }
        if let Some(p) = v.improvement_pct {
            out.push(Figure::new(
                format!("replay/{}/improvement_pct", v.volume),
                format!("Figs 12/14: {} Bonfire converges sooner by", v.volume),
                "%",
                p,
                paper("proj1: \"a 59% improvement\"", ""),
            ));
        }
    }
    out
}
