//! `lab bonfire`'s tables, CSV files, SVG figures and report.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

pub use super::bonfire_io::{replay_text, zipf_text};
use super::format::{cell, opt};
use super::plots::{bars, chart, Series};
use super::{write_csv, writer};
use crate::bonfire::{self, Report};
use crate::bonfire_overheads::Overhead;

use crate::bonfire::parts::FullReport;

pub fn region_name(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MB", bytes >> 20)
    } else {
        format!("{} KB", bytes >> 10)
    }
}

pub fn days_text(r: &Report) -> String {
    let mut s = String::new();
    volumes_text(&mut s, r);
    cases_text(&mut s, r);
    algorithms_text(&mut s, r);
    s
}

/// The trace's volumes and their working sets.
fn volumes_text(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "Bonfire §4.3 on {}: {}, each warmed from the one before; hit rates per {:.0} s; LRU caches{}\n",
        r.source,
        if r.day_s == 86_400.0 {
            "days of 24 h".to_owned()
        } else {
            format!("periods (\"days\") of {} s", r.day_s)
        },
        r.interval_s,
        if r.readahead_bytes > 0 {
            format!(", {} KiB read-ahead", r.readahead_bytes >> 10)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "Volumes, reaccess classes (% of reaccessed blocks) and the decision tree (Figure 8)"
    );
    for v in &r.volumes {
        let _ = write!(
            s,
            "  {:<12} {:>9} requests ({:>3.0} % reads), working set {:>9} blocks, {} day(s)",
            v.volume,
            v.requests,
            100.0 * v.read_requests as f64 / v.requests.max(1) as f64,
            v.working_set_blocks,
            v.days
        );
        if let Some(why) = &v.skipped {
            let _ = writeln!(s, " — skipped: {why}");
            continue;
        }
        let _ = writeln!(s);
        if let Some(c) = &v.reaccess {
            let _ = writeln!(
                s,
                "      hourly {:.0} %, daily {:.0} %, other {:.0} %; {:.0} % of reaccesses within 10 MiB",
                c.hourly_block_pct, c.daily_block_pct, c.other_block_pct, c.reuse_under_10mib_pct
            );
        }
        if let Some(rec) = &v.recommendation {
            let _ = writeln!(s, "      recommended: {} — {}", rec.algorithm, rec.because);
        }
        let _ = match v.measured_best {
            Some(best) => writeln!(
                s,
                "      measured best at the middle setting: {best} ({} of {} days)",
                v.measured_best_days, v.warmed_days
            ),
            None => writeln!(
                s,
                "      measured best at the middle setting: none (the top is shared over {} days)",
                v.warmed_days
            ),
        };
    }
}

/// Table 3 over the Table 2 grid, by region size.
fn cases_text(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "\nTable 3 over the Table 2 grid: medians over (volume, day) of each one's best algorithm"
    );
    let _ = writeln!(
        s,
        "  {:>6} {:>6} {:>6} {:>5} {:>5} {:>5} {:>9} | {:>8} {:>8} {:>8} | {:>6} {:>6} {:>6} {:>7} {:>8}",
        "region",
        "cache",
        "warmup",
        "Th_V",
        "Th_N",
        "cases",
        "T_pre min",
        "cold h",
        "bonf. h",
        "impr. %",
        "SLR cold",
        "always",
        "bonf.",
        "impr. %",
        "gain pts"
    );
    let mut regions: Vec<u64> = r.table.iter().map(|t| t.region_bytes).collect();
    regions.dedup();
    regions.sort_unstable_by(|a, b| b.cmp(a));
    regions.dedup();
    for region in regions {
        for t in r.table.iter().filter(|t| t.region_bytes == region) {
            let _ = writeln!(
                s,
                "  {:>6} {:>6} {:>6} {:>5} {:>5} {:>5} {:>9} | {:>8} {:>8} {:>8} | {:>8} {:>6} {:>6} {:>7} {:>8}",
                region_name(t.region_bytes),
                t.cache_pct,
                t.warmup_pct,
                t.th_v * 100.0,
                t.th_n * 100.0,
                t.cases,
                opt(t.preload_min, 2),
                hours_text(t.cold_converge_h),
                hours_text(t.bonfire_converge_h),
                opt(t.converge_improvement_pct, 0),
                opt(t.load_reduction_cold_pct, 0),
                opt(t.load_reduction_always_pct, 0),
                opt(t.load_reduction_bonfire_pct, 0),
                opt(t.load_reduction_improvement_pct, 0),
                opt(t.load_reduction_gain_points, 1),
            );
        }
    }
}

/// Figures 6–7's algorithms, the tally beside the paper's, and the shifted daily reaccesses.
fn algorithms_text(s: &mut String, r: &Report) {
    let m = &r.middle;
    let _ = writeln!(
        s,
        "\nFigures 6–7 at the middle setting (cache {} %, warm-up {} %, {} regions, Th_V {}, Th_N {}): T_converge h [server load reduction %]",
        m.cache_pct,
        m.warmup_pct,
        region_name(m.region_bytes),
        m.th_v,
        m.th_n
    );
    for f in &r.figures {
        let _ = write!(
            s,
            "  {:<12} day {}: cold {} [{}], always-warm [{}]",
            f.volume,
            f.day,
            hours_text(f.cold_converge_h),
            opt(f.load_reduction_cold_pct, 0),
            opt(f.load_reduction_always_pct, 0)
        );
        for x in &f.algorithms {
            let _ = write!(
                s,
                ", {} {} [{}]",
                x.algorithm,
                hours_text(x.converge_h),
                opt(x.load_reduction_pct, 0)
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "\nHeadline at the middle setting, over {} warmed (volume, day) pairs",
        r.headline.cases
    );
    s.push_str(&tally_text(&r.headline));
    for d in &r.shifted_daily {
        let _ = writeln!(
            s,
            "\nDaily reaccesses (§4.3.3): {} with days starting at {:02}:00, over {} days",
            d.volume, d.day_start_hour, d.headline.cases
        );
        s.push_str(&tally_text(&d.headline));
    }
}

pub fn tally_text(h: &bonfire::Headline) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:<9} {:>13} {:>10} {:>18} {:>17} {:>13} {:>12}",
        "algorithm",
        "best T_conv",
        "best SLR",
        "sooner than cold",
        "more SLR than cold",
        "median T_conv",
        "median SLR"
    );
    for t in &h.algorithms {
        let _ = writeln!(
            s,
            "  {:<9} {:>13} {:>10} {:>18} {:>17} {:>11} h {:>10} %",
            t.algorithm.to_string(),
            t.best_converge,
            t.best_load,
            t.converges_sooner_than_cold,
            t.reduces_more_load_than_cold,
            hours_text(t.median_converge_h),
            opt(t.median_load_reduction_pct, 0)
        );
    }
    s
}

/// Every Table 4 column the run measured.
pub fn all_overheads(r: &FullReport) -> Vec<&Overhead> {
    let mut all: Vec<&Overhead> = r.zipf.iter().map(|z| &z.overhead).collect();
    if let Some(d) = &r.days {
        all.extend(d.overheads.iter());
    }
    all
}

pub fn bytes_text(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

pub fn overheads_text(r: &FullReport) -> String {
    let all = all_overheads(r);
    let mut s = String::new();
    if all.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\nOverheads (Table 4): monitoring a window, then pre-loading Last-K on {} disk models; metadata-only / metadata+data",
        all[0].device
    );
    for o in all {
        let _ = writeln!(
            s,
            "  {}: {} requests over {:.0} s, {} warm-up blocks",
            o.workload, o.window_requests, o.window_s, o.warmup_blocks
        );
        let _ = writeln!(
            s,
            "      log space      {:>10} / {:>10}",
            bytes_text(o.metadata_only.log_bytes as f64),
            bytes_text(o.metadata_data.log_bytes as f64)
        );
        let _ = writeln!(
            s,
            "      log bandwidth  {:>8}/s / {:>8}/s",
            bytes_text(o.metadata_only.log_bytes_per_s),
            bytes_text(o.metadata_data.log_bytes_per_s)
        );
        let _ = writeln!(
            s,
            "      pre-warm time  {:>8.1} s / {:>8.1} s",
            o.metadata_only.prewarm_s, o.metadata_data.prewarm_s
        );
    }
    s
}

/// A time that may be "never" (JSON `null`, CSV empty, text "never").
pub fn hours_text(h: Option<f64>) -> String {
    h.map_or("never".into(), |h| format!("{h:.1}"))
}

pub fn write_outputs(dir: &Path, r: &FullReport) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = writer(dir);
    write("report.json", serde_json::to_string_pretty(r)?)?;
    let mut t4 = Vec::new();
    for o in all_overheads(r) {
        for (scheme, x) in [
            ("metadata-only", &o.metadata_only),
            ("metadata+data", &o.metadata_data),
        ] {
            t4.push(vec![
                o.workload.clone(),
                scheme.to_owned(),
                o.window_requests.to_string(),
                format!("{:.3}", o.window_s),
                o.warmup_blocks.to_string(),
                x.log_bytes.to_string(),
                x.log_writes.to_string(),
                format!("{:.1}", x.log_bytes_per_s),
                x.preload_log_read_bytes.to_string(),
                format!("{:.3}", x.prewarm_s),
            ]);
        }
    }
    write_csv(
        dir,
        "table4_overheads.csv",
        &[
            "workload",
            "scheme",
            "window_requests",
            "window_s",
            "warmup_blocks",
            "log_bytes",
            "log_writes",
            "log_bytes_per_s",
            "preload_log_read_bytes",
            "prewarm_s",
        ],
        t4,
    )?;
    if let Some(d) = &r.days {
        write_csv_days(dir, d)?;
    }
    if let Some(z) = &r.zipf {
        super::bonfire_io::write_zipf(dir, z)?;
    }
    if let Some(x) = &r.replay {
        super::bonfire_io::write_replay(dir, x)?;
    }
    Ok(())
}

pub fn days_svgs(dir: &Path, d: &Report) -> Result<()> {
    if d.figures.is_empty() {
        return Ok(());
    }
    let groups: Vec<String> = d
        .figures
        .iter()
        .map(|f| format!("{} d{}", f.volume, f.day))
        .collect();
    let algs: Vec<_> = d.figures[0]
        .algorithms
        .iter()
        .map(|x| x.algorithm)
        .collect();
    let mut conv = vec![(
        "cold".to_owned(),
        d.figures
            .iter()
            .map(|f| f.cold_converge_h)
            .collect::<Vec<_>>(),
    )];
    let mut slr = vec![
        (
            "cold".to_owned(),
            d.figures
                .iter()
                .map(|f| f.load_reduction_cold_pct)
                .collect::<Vec<_>>(),
        ),
        (
            "always-warm".to_owned(),
            d.figures
                .iter()
                .map(|f| f.load_reduction_always_pct)
                .collect(),
        ),
    ];
    for (i, alg) in algs.iter().enumerate() {
        conv.push((
            alg.to_string(),
            d.figures
                .iter()
                .map(|f| f.algorithms.get(i).and_then(|x| x.converge_h))
                .collect(),
        ));
        slr.push((
            alg.to_string(),
            d.figures
                .iter()
                .map(|f| f.algorithms.get(i).and_then(|x| x.load_reduction_pct))
                .collect(),
        ));
    }
    bars(
        &dir.join("fig6_convergence.svg"),
        "Convergence time at the middle setting (Bonfire Fig. 6)",
        "T_converge, hours",
        &groups,
        &conv,
    )?;
    bars(
        &dir.join("fig7_load_reduction.svg"),
        "Server I/O load reduction (Bonfire Fig. 7)",
        "server load reduction, %",
        &groups,
        &slr,
    )?;
    // The hit rate over each figure day.
    for f in &d.figures {
        let mut names = vec!["always-warm".to_owned(), "cold".to_owned()];
        names.extend(f.algorithms.iter().map(|x| x.algorithm.to_string()));
        let series: Vec<Series> = names
            .iter()
            .enumerate()
            .map(|(k, name)| Series {
                name: name.clone(),
                points: f
                    .hit_rates
                    .iter()
                    .enumerate()
                    .filter_map(|(i, row)| {
                        row[k].map(|h| (i as f64 * d.interval_s / 3600.0, h * 100.0))
                    })
                    .collect(),
            })
            .collect();
        let safe: String = f
            .volume
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        chart(
            &dir.join(format!("hit_rate_{safe}_day{}.svg", f.day)),
            &format!("Read hit rate of {} on day {}", f.volume, f.day),
            "hours into the day",
            "read hit rate, %",
            false,
            &series,
        )?;
    }
    Ok(())
}

/// The paper's Table 3 rows (1 MB regions): cache %, warm-up %, Th_V %, Th_N %, and its
/// T_converge improvement and server-load-reduction improvement, %, as printed.
const PAPER_TABLE3: [(f64, f64, f64, f64, &str, &str); 16] = [
    (100.0, 25.0, 90.0, 5.0, "76", "112"),
    (100.0, 25.0, 90.0, 1.0, "19", "79"),
    (100.0, 25.0, 70.0, 5.0, "79", "150"),
    (100.0, 25.0, 70.0, 1.0, "48", "91"),
    (100.0, 5.0, 90.0, 5.0, "53", "70"),
    (100.0, 5.0, 90.0, 1.0, "14", "44"),
    (100.0, 5.0, 70.0, 5.0, "72", "96"),
    (100.0, 5.0, 70.0, 1.0, "14", "48"),
    (25.0, 25.0, 90.0, 5.0, "100", "207"),
    (25.0, 25.0, 90.0, 1.0, "70", "212"),
    (25.0, 25.0, 70.0, 5.0, "100", "221"),
    (25.0, 25.0, 70.0, 1.0, "72", "228"),
    (25.0, 5.0, 90.0, 5.0, "80", "148"),
    (25.0, 5.0, 90.0, 1.0, "64", "160"),
    (25.0, 5.0, 70.0, 5.0, "100", "156"),
    (25.0, 5.0, 70.0, 1.0, "63", "172"),
];

/// The headline figures of one run for `--seeds`: Table 3's rows that the paper prints (1 MB
/// regions), the middle setting's tallies, and Figure 10's hit rates; the paper's value beside
/// each where it gives one (Table 3 only when `beside_paper`: the paper's traces or our
/// stand-in for them).
pub fn headlines(r: &FullReport, beside_paper: bool) -> Vec<crate::spread::Figure> {
    use crate::spread::Figure;
    let mut out = Vec::new();
    if let Some(d) = &r.days {
        for t in d.table.iter().filter(|t| t.region_bytes == 1 << 20) {
            let key = format!(
                "table3/cache{}/warmup{}/thv{}/thn{}",
                t.cache_pct,
                t.warmup_pct,
                t.th_v * 100.0,
                t.th_n * 100.0
            );
            let label = format!(
                "Table 3: cache {} %, warm-up {} %, Th_V {} %, Th_N {} %",
                t.cache_pct,
                t.warmup_pct,
                (t.th_v * 100.0).round(),
                (t.th_n * 100.0).round()
            );
            let paper = PAPER_TABLE3.iter().find(|p| {
                p.0 == t.cache_pct
                    && p.1 == t.warmup_pct
                    && (p.2 - t.th_v * 100.0).abs() < 1e-9
                    && (p.3 - t.th_n * 100.0).abs() < 1e-9
            });
            let (conv, slr) = match paper {
                Some(p) if beside_paper => (p.4, p.5),
                _ => ("", ""),
            };
            if let Some(v) = t.converge_improvement_pct {
                out.push(Figure::new(
                    format!("{key}/converge_improvement_pct"),
                    format!("{label}: T_converge improvement"),
                    "%",
                    v,
                    conv,
                ));
            }
            if let Some(v) = t.load_reduction_improvement_pct {
                out.push(Figure::new(
                    format!("{key}/load_reduction_improvement_pct"),
                    format!("{label}: load reduction improvement"),
                    "%",
                    v,
                    slr,
                ));
            }
            if let Some(v) = t.load_reduction_gain_points {
                out.push(Figure::new(
                    format!("{key}/load_reduction_gain_points"),
                    format!("{label}: load reduction gain"),
                    "points",
                    v,
                    "",
                ));
            }
        }
        for t in &d.headline.algorithms {
            out.push(Figure::new(
                format!("headline/{}/best_converge", t.algorithm),
                format!(
                    "middle setting: {} soonest T_converge (volume-days)",
                    t.algorithm
                ),
                "",
                t.best_converge as f64,
                "",
            ));
        }
    }
    if let Some(z) = &r.zipf {
        for x in &z.series {
            if let Some(h) = x.hit_rate {
                out.push(Figure::new(
                    format!("fig10/{}/hit_rate_pct", x.scheme),
                    format!("Fig 10: {} hit rate, second half", x.scheme),
                    "%",
                    h * 100.0,
                    "",
                ));
            }
            if let Some(ms) = x.mean_read_latency_ms {
                let paper = match x.scheme.as_str() {
                    "cold" => "2.6 ms",
                    _ => "0.5 ms",
                };
                out.push(Figure::new(
                    format!("fig11/{}/read_latency_ms", x.scheme),
                    format!("Fig 11: {} read latency, second half", x.scheme),
                    "ms",
                    ms,
                    paper,
                ));
            }
        }
    }
    if let Some(x) = &r.replay {
        out.extend(super::bonfire_io::replay_headlines(x, beside_paper));
    }
    out
}

/// The single run's report as text: each part run, then the overheads.
pub fn full_text(full: &FullReport) -> String {
    let mut out = String::new();
    if let Some(r) = &full.days {
        out.push_str(&days_text(r));
    }
    if let Some(z) = &full.zipf {
        out.push_str(&zipf_text(z));
    }
    if let Some(x) = &full.replay {
        out.push_str(&replay_text(x));
    }
    out.push_str(&overheads_text(full));
    out
}

/// Runs over several seeds: each seed's headline figures, and their spread beside the paper's
/// (`builtin`: each seed drew its own trace).
pub fn seeds_spread(reports: &[(u64, FullReport)], builtin: bool) -> Vec<crate::spread::Spread> {
    let runs: Vec<_> = reports
        .iter()
        .map(|(seed, full)| (*seed, headlines(full, builtin)))
        .collect();
    crate::spread::spread(&runs)
}

/// Writes each seed's outputs into `dir/seed-N`, and `spread.csv` and `spread.json`.
pub fn write_seed_files(
    dir: &Path,
    reports: &[(u64, FullReport)],
    rows: &[crate::spread::Spread],
) -> Result<()> {
    for (seed, full) in reports {
        write_outputs(&dir.join(format!("seed-{seed}")), full)?;
    }
    std::fs::write(dir.join("spread.csv"), crate::spread::csv(rows))?;
    std::fs::write(dir.join("spread.json"), serde_json::to_string_pretty(rows)?)?;
    Ok(())
}

/// The spread over seeds as JSON: the seeds, the spread and every run's report.
pub fn seeds_json(
    reports: &[(u64, FullReport)],
    rows: &[crate::spread::Spread],
) -> serde_json::Value {
    let runs: Vec<&FullReport> = reports.iter().map(|(_, r)| r).collect();
    serde_json::json!({
        "seeds": reports.iter().map(|(s, _)| *s).collect::<Vec<u64>>(),
        "spread": rows,
        "runs": runs,
    })
}

/// The spread over seeds as a table, headed by what each seed drew.
pub fn seeds_text(
    reports: &[(u64, FullReport)],
    rows: &[crate::spread::Spread],
    builtin: bool,
) -> String {
    let first = reports.first().map_or(0, |(s, _)| *s);
    let last = reports.last().map_or(0, |(s, _)| *s);
    format!(
        "Bonfire over {} seeds ({first}–{last}){}\n\n{}",
        reports.len(),
        if builtin {
            ": each seed draws its own gen:reaccess trace, Zipf workload and Random-K"
        } else {
            ": one trace; each seed draws its own Random-K and Zipf workload"
        },
        crate::spread::table(rows, reports.len())
    )
}

/// The days part's CSV files and figures: every case (Table 2's grid), Table 3, Figures 6–8
/// and their SVGs.
fn write_csv_days(dir: &Path, d: &Report) -> Result<()> {
    cases_csvs(dir, d)?;
    figures_csvs(dir, d)?;
    days_svgs(dir, d)
}

/// Every case of the grid, and Table 3.
fn cases_csvs(dir: &Path, d: &Report) -> Result<()> {
    write_csv(
        dir,
        "cases.csv",
        &[
            "volume",
            "day",
            "cache_pct",
            "warmup_pct",
            "region_bytes",
            "algorithm",
            "th_v",
            "th_n",
            "preload_blocks",
            "preload_s",
            "cold_converge_h",
            "warmed_converge_h",
            "converge_improvement_pct",
            "load_reduction_cold_pct",
            "load_reduction_always_pct",
            "load_reduction_warmed_pct",
        ],
        d.cases.iter().map(|c| {
            vec![
                c.volume.clone(),
                c.day.to_string(),
                c.cache_pct.to_string(),
                c.warmup_pct.to_string(),
                c.region_bytes.to_string(),
                c.algorithm.to_string(),
                c.th_v.to_string(),
                c.th_n.to_string(),
                c.preload_blocks.to_string(),
                format!("{:.3}", c.preload_s),
                cell(c.cold_converge_h),
                cell(c.warmed_converge_h),
                cell(c.converge_improvement_pct),
                cell(c.load_reduction_cold_pct),
                cell(c.load_reduction_always_pct),
                cell(c.load_reduction_warmed_pct),
            ]
        }),
    )?;
    write_csv(
        dir,
        "table3.csv",
        &[
            "region_bytes",
            "cache_pct",
            "warmup_pct",
            "th_v",
            "th_n",
            "cases",
            "preload_min",
            "cold_converge_h",
            "bonfire_converge_h",
            "converge_improvement_pct",
            "load_reduction_cold_pct",
            "load_reduction_always_pct",
            "load_reduction_bonfire_pct",
            "load_reduction_improvement_pct",
            "load_reduction_gain_points",
        ],
        d.table.iter().map(|t| {
            vec![
                t.region_bytes.to_string(),
                t.cache_pct.to_string(),
                t.warmup_pct.to_string(),
                t.th_v.to_string(),
                t.th_n.to_string(),
                t.cases.to_string(),
                cell(t.preload_min),
                cell(t.cold_converge_h),
                cell(t.bonfire_converge_h),
                cell(t.converge_improvement_pct),
                cell(t.load_reduction_cold_pct),
                cell(t.load_reduction_always_pct),
                cell(t.load_reduction_bonfire_pct),
                cell(t.load_reduction_improvement_pct),
                cell(t.load_reduction_gain_points),
            ]
        }),
    )?;
    Ok(())
}

/// Figures 6–7's algorithms and Figure 8's recommendations.
fn figures_csvs(dir: &Path, d: &Report) -> Result<()> {
    let mut f67 = Vec::new();
    for f in &d.figures {
        let row = |scheme: String, h: Option<f64>, slr: Option<f64>| {
            vec![
                f.volume.clone(),
                f.day.to_string(),
                scheme,
                cell(h),
                cell(slr),
            ]
        };
        f67.push(row(
            "cold".into(),
            f.cold_converge_h,
            f.load_reduction_cold_pct,
        ));
        f67.push(row(
            "always-warm".into(),
            Some(0.0),
            f.load_reduction_always_pct,
        ));
        for x in &f.algorithms {
            f67.push(row(
                x.algorithm.to_string(),
                x.converge_h,
                x.load_reduction_pct,
            ));
        }
    }
    write_csv(
        dir,
        "fig6_7_algorithms.csv",
        &[
            "volume",
            "day",
            "scheme",
            "converge_h",
            "load_reduction_pct",
        ],
        f67,
    )?;
    let mut rec = Vec::new();
    for v in d.volumes.iter().filter(|v| v.skipped.is_none()) {
        let (Some(c), Some(r)) = (&v.reaccess, &v.recommendation) else {
            continue;
        };
        rec.push(vec![
            v.volume.clone(),
            format!("{:.2}", c.hourly_block_pct),
            format!("{:.2}", c.daily_block_pct),
            format!("{:.2}", c.other_block_pct),
            format!("{:.2}", c.reuse_under_10mib_pct),
            r.algorithm.to_string(),
            r.start_at_hour.map_or(String::new(), |h| h.to_string()),
            v.measured_best.map_or(String::new(), |a| a.to_string()),
            v.measured_best_days.to_string(),
            v.warmed_days.to_string(),
        ]);
    }
    write_csv(
        dir,
        "fig8_recommendations.csv",
        &[
            "volume",
            "hourly_block_pct",
            "daily_block_pct",
            "other_block_pct",
            "reuse_under_10mib_pct",
            "recommended",
            "start_at_hour",
            "measured_best",
            "measured_best_days",
            "warmed_days",
        ],
        rec,
    )?;
    Ok(())
}
