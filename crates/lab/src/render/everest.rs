//! `lab everest`'s tables, CSV files and report.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::{write_csv, writer};
use crate::everest::{ConfigResult, Report};

pub fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| {
        if v >= 1000.0 {
            format!("{:.2} s", v / 1000.0)
        } else {
            format!("{v:.2} ms")
        }
    })
}

pub fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

pub fn table(r: &Report) -> String {
    let mut s = String::new();
    episodes_text(&mut s, r);
    responses_text(&mut s, r);
    parts_text(&mut s, r);
    costs_text(&mut s, r);
    s
}

/// The setup, and the peak episodes (Table 1) with the notices.
fn episodes_text(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "Everest §4.1 on {}: volumes are RAID-0 of four {} with a store on the last {:.1} %; T_base = {}, T_store = {}, N_reclaim = {}\n",
        r.source, r.device, r.store_partition_pct, r.t_base, r.t_store, r.n_reclaim
    );
    let _ = writeln!(
        s,
        "Peak episodes (Table 1; seed {}; {})",
        r.seed,
        match r.align {
            cordillera_trace::peaks::EpisodeAlign::Centred =>
                "each centred on its peak, which it holds whole",
            cordillera_trace::peaks::EpisodeAlign::Grid =>
                "each the peak's segment and the next, on Everest's grid",
        }
    );
    let _ = writeln!(
        s,
        "  {:>2}  {:>9}  {:>9}  {:>15}  {:>9}  {:>6}  {:>11}  replayed volumes (requests)",
        "#", "start s", "end s", "peak s", "requests", "read %", "peak req/s"
    );
    for e in &r.episodes {
        let vols: Vec<String> = e
            .volumes
            .iter()
            .map(|v| format!("{} ({})", v.volume, v.requests))
            .collect();
        let _ = writeln!(
            s,
            "  {:>2}  {:>9.0}  {:>9.0}  {:>15}  {:>9}  {:>6}  {:>11.0}  {}",
            e.rank,
            e.start_s,
            e.end_s,
            format!(
                "{:.0}–{:.0}{}",
                e.peak_start_s,
                e.peak_end_s,
                if e.peak_whole { "" } else { " CUT" }
            ),
            e.requests,
            e.read_pct.map_or("-".into(), |p| format!("{p:.0}")),
            e.peak_rate_per_s,
            vols.join(", ")
        );
    }
    for n in &r.notices {
        let _ = writeln!(s, "  notice: {n}");
    }
}

/// Response times per configuration (Figure 5) and the data off-loaded (Figure 6).
fn responses_text(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "\nResponse times (Figure 5): mean, and 99th percentile in brackets"
    );
    let _ = writeln!(
        s,
        "  {:>2}  {:<9}  {:>10}  {:>22}  {:>22}  {:>10}  {:>9}",
        "#", "config", "mean", "reads", "writes", "off-loaded", "speed-up"
    );
    for e in &r.episodes {
        let rows: [(&str, &ConfigResult, Option<f64>); 3] = [
            ("baseline", &e.configs.baseline, None),
            ("always", &e.configs.always, e.always_speedup),
            ("peak", &e.configs.peak, e.peak_speedup),
        ];
        for (name, c, speedup) in rows {
            let _ = writeln!(
                s,
                "  {:>2}  {:<9}  {:>10}  {:>22}  {:>22}  {:>10}  {:>9}",
                e.rank,
                name,
                ms(c.mean_ms),
                format!("{} [{}]", ms(c.read_mean_ms), ms(c.read_p99_ms)),
                format!("{} [{}]", ms(c.write_mean_ms), ms(c.write_p99_ms)),
                mb(c.offloaded_write_bytes as f64),
                speedup.map_or("".into(), |x| format!("{x:.1}×")),
            );
        }
    }
    let _ = writeln!(
        s,
        "\nOff-loaded data (Figure 6), all clients: largest (exact), time-average (sampled every {} s), left at the end",
        r.sample_s
    );
    for e in &r.episodes {
        for (name, c) in [("always", &e.configs.always), ("peak", &e.configs.peak)] {
            let _ = writeln!(
                s,
                "  {:>2}  {:<7}  max {:>10}  mean {:>10}  at end {:>10}  (last answer at {:.0} s)",
                e.rank,
                name,
                mb(c.offloaded_max_bytes as f64),
                mb(c.offloaded_mean_bytes),
                mb(c.offloaded_at_end_bytes as f64),
                c.last_answer_s
            );
        }
    }
}

/// The parts run besides: sensitivity (Figure 7), NVRAM (Figure 8) and recovery.
fn parts_text(s: &mut String, r: &Report) {
    if !r.sensitivity.is_empty() {
        let _ = writeln!(
            s,
            "\nSensitivity (Figure 7), peak off-load over all episodes"
        );
        for p in &r.sensitivity {
            let _ = writeln!(
                s,
                "  {:<9} = {:>5}: mean {:>10}, off-loaded data mean {:>9.1} MB, reads from stores {:.2} %",
                p.parameter,
                p.value,
                ms(p.mean_ms),
                p.offloaded_mean_mb,
                p.offloaded_read_pct
            );
        }
    }
    if r.episodes.iter().any(|e| e.nvram.is_some()) {
        let _ = writeln!(
            s,
            "\nNVRAM (Figure 8): 128 MB shared by the three volumes, half for writes"
        );
        for e in &r.episodes {
            if let Some(n) = &e.nvram {
                let _ = writeln!(
                    s,
                    "  {:>2}  baseline {:>10} → with NVRAM {:>10};  peak off-load {:>10} → with NVRAM {:>10}",
                    e.rank,
                    ms(e.configs.baseline.mean_ms),
                    ms(n.baseline.mean_ms),
                    ms(e.configs.peak.mean_ms),
                    ms(n.peak.mean_ms)
                );
            }
        }
    }
    if let Some(rec) = &r.recovery {
        let _ = writeln!(
            s,
            "\nWorst-case recovery (Table 3): crash {:.0} s into episode {}",
            rec.crash_at_s, rec.episode
        );
        let _ = writeln!(
            s,
            "  max log size          {}",
            mb(rec.max_log_bytes as f64)
        );
        let _ = writeln!(s, "  max log records       {}", rec.max_log_records);
        let _ = writeln!(
            s,
            "  max valid data        {}",
            mb(rec.max_valid_bytes as f64)
        );
        let _ = writeln!(
            s,
            "  max store recovery    {:.2} s",
            rec.max_store_recovery_s
        );
        let _ = writeln!(
            s,
            "  max client recovery   {:.2} s",
            rec.max_client_recovery_s
        );
        let _ = writeln!(
            s,
            "  metadata (32 B/extent) {:.1} KB",
            rec.metadata_bytes as f64 / 1e3
        );
    }
}

/// The client's CPU per off-loaded write, the micro-benchmarks (§4.3) and OLTP (§4.2).
fn costs_text(s: &mut String, r: &Report) {
    if let Some(us) = r.client_us_per_offloaded_write {
        let _ = writeln!(
            s,
            "\nClient core time per off-loaded write (peak off-load runs): {us:.2} µs (Everest: 56 µs)"
        );
    }
    if let Some(m) = &r.micro {
        let _ = writeln!(
            s,
            "\nMicro-benchmarks (§4.3, Figure 13): one Cheetah 15K client disk, 64 KiB requests"
        );
        let _ = writeln!(
            s,
            "  (a) throughput vs reads, one store, always off-load vs none"
        );
        for p in &m.read_ratio {
            let _ = writeln!(
                s,
                "      {:>3.0} % reads: {:>7.1} MB/s off-load, {:>7.1} MB/s without",
                p.x,
                p.offload_mb_per_s,
                p.baseline_mb_per_s.unwrap_or(0.0)
            );
        }
        let _ = writeln!(s, "  (b) reclaim throughput vs N_reclaim");
        for (name, points) in [
            ("random", &m.reclaim_random),
            ("streaming", &m.reclaim_streaming),
        ] {
            let cells: Vec<String> = points
                .iter()
                .map(|p| format!("{:.0}: {:.1} MB/s", p.x, p.offload_mb_per_s))
                .collect();
            let _ = writeln!(s, "      {name:<9} {}", cells.join(", "));
        }
        let _ = writeln!(
            s,
            "  (c) random write throughput vs stores (always off-load)"
        );
        for p in &m.stores {
            let _ = writeln!(
                s,
                "      {} store(s): {:>7.1} MB/s (no off-load: {:.1} MB/s)",
                p.x,
                p.offload_mb_per_s,
                p.baseline_mb_per_s.unwrap_or(0.0)
            );
        }
    }
    if let Some(o) = &r.oltp {
        let _ = writeln!(
            s,
            "\nOLTP throughput (§4.2): random {} KiB requests, {:.0} % writes, over {:.1} GB of one \
             Cheetah 15K disk, {} in flight, {} s; the baseline {:.0} I/O/s. The paper counts \
             SQL Server's new-order transactions; we count the I/Os of its disk load, normalized \
             to the baseline as the paper normalizes. With every read on the client's disk, \
             off-loading writes gives at most {:.2}× (1 / (1 − write fraction)).",
            o.request_bytes / 1024,
            o.write_fraction * 100.0,
            o.span_bytes as f64 / 1e9,
            o.depth,
            o.seconds,
            o.baseline_iops,
            o.read_bound_ceiling
        );
        for (title, bars) in [
            ("Figure 9: one server", &o.figure9),
            (
                "Figure 11 (solid): one client, idle stores",
                &o.figure11_stores,
            ),
            (
                "Figure 11 (dashed): clients sharing one store",
                &o.figure11_clients,
            ),
            ("Figure 12: 1-way and 2-way off-load", &o.figure12),
        ] {
            let _ = writeln!(s, "  {title}");
            for b in bars {
                let _ = writeln!(
                    s,
                    "    {:<38} {:>7.0} I/O/s  {:>5.2}×   (paper: {})",
                    b.config, b.iops, b.over_baseline, b.paper
                );
            }
        }
    }
    if let Some(w) = &r.worst_case {
        worst_case_text(s, w);
    }
}

fn worst_case_text(s: &mut String, w: &crate::everest::worst::WorstCase) {
    let _ = writeln!(
        s,
        "\nWorst case (§4.2, Figure 10): two servers with the OLTP load, each on its own disk; \
         machine 1 off-loads to a store on machine 2's disk; machine 2 starts after {} s; \
         measured {} s more. Throughput over the baseline ({:.0} I/O/s, one server alone, no \
         off-load).",
        w.before_s, w.after_s, w.baseline_iops
    );
    let _ = writeln!(
        s,
        "    {:<18} {:>12} {:>11} {:>10} {:>10} {:>22}",
        "", "off-loaded", "m1 before", "m1 after", "m2 after", "m1 reads from store"
    );
    for r in &w.rows {
        let _ = writeln!(
            s,
            "    {:<18} {:>8.0} MiB {:>10.2}× {:>9.2}× {:>9.2}× {:>14} of {:>6}",
            r.config,
            r.offloaded_at_start_bytes as f64 / (1 << 20) as f64,
            r.machine1_before,
            r.machine1_after,
            r.machine2_after,
            r.machine1_store_reads_after,
            r.machine1_reads_after
        );
    }
    let _ = writeln!(s, "    paper: {}", w.paper);
}

pub fn write_outputs(dir: &Path, r: &Report) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = writer(dir);
    write("report.json", serde_json::to_string_pretty(r)?)?;
    episode_csvs(dir, r)?;
    parts_csvs(dir, r)?;
    super::plots::write_svgs(dir, r)?;
    Ok(())
}

/// Each episode's response times (Figure 5), data off-loaded (Figure 6) and NVRAM (Figure 8).
fn episode_csvs(dir: &Path, r: &Report) -> Result<()> {
    let cell = super::format::cell;
    let (mut fig5, mut fig6, mut fig8) = (Vec::new(), Vec::new(), Vec::new());
    for e in &r.episodes {
        for (name, c) in [
            ("baseline", &e.configs.baseline),
            ("always", &e.configs.always),
            ("peak", &e.configs.peak),
        ] {
            fig5.push(vec![
                e.rank.to_string(),
                cell(e.replayed_read_pct),
                name.to_owned(),
                c.requests.to_string(),
                cell(c.mean_ms),
                cell(c.read_mean_ms),
                cell(c.write_mean_ms),
                cell(c.read_p99_ms),
                cell(c.write_p99_ms),
                c.offloaded_write_bytes.to_string(),
            ]);
            if name != "baseline" {
                for (k, b) in c.offloaded_bytes.iter().enumerate() {
                    fig6.push(vec![
                        e.rank.to_string(),
                        name.to_owned(),
                        (k as f64 * r.sample_s).to_string(),
                        b.to_string(),
                    ]);
                }
            }
        }
        if let Some(n) = &e.nvram {
            for (name, nv, c) in [
                ("baseline", false, &e.configs.baseline),
                ("baseline", true, &n.baseline),
                ("peak", false, &e.configs.peak),
                ("peak", true, &n.peak),
            ] {
                fig8.push(vec![
                    e.rank.to_string(),
                    name.to_owned(),
                    nv.to_string(),
                    cell(c.mean_ms),
                    cell(c.read_mean_ms),
                    cell(c.write_mean_ms),
                ]);
            }
        }
    }
    write_csv(
        dir,
        "fig5_response_times.csv",
        &[
            "episode",
            "read_pct",
            "config",
            "requests",
            "mean_ms",
            "read_mean_ms",
            "write_mean_ms",
            "read_p99_ms",
            "write_p99_ms",
            "offloaded_write_bytes",
        ],
        fig5,
    )?;
    write_csv(
        dir,
        "fig6_offloaded.csv",
        &["episode", "config", "time_s", "offloaded_bytes"],
        fig6,
    )?;
    if !fig8.is_empty() {
        write_csv(
            dir,
            "fig8_nvram.csv",
            &[
                "episode",
                "config",
                "nvram",
                "mean_ms",
                "read_mean_ms",
                "write_mean_ms",
            ],
            fig8,
        )?;
    }
    Ok(())
}

/// The parts run besides: sensitivity, recovery, the micro-benchmarks and OLTP.
fn parts_csvs(dir: &Path, r: &Report) -> Result<()> {
    let cell = super::format::cell;
    if !r.sensitivity.is_empty() {
        write_csv(
            dir,
            "fig7_sensitivity.csv",
            &[
                "parameter",
                "value",
                "mean_ms",
                "offloaded_mean_mb",
                "offloaded_read_pct",
            ],
            r.sensitivity.iter().map(|p| {
                vec![
                    p.parameter.to_owned(),
                    p.value.to_string(),
                    cell(p.mean_ms),
                    format!("{:.3}", p.offloaded_mean_mb),
                    format!("{:.4}", p.offloaded_read_pct),
                ]
            }),
        )?;
    }
    if let Some(rec) = &r.recovery {
        write_csv(
            dir,
            "table3_recovery.csv",
            &[
                "episode",
                "crash_at_s",
                "max_log_bytes",
                "max_log_records",
                "max_valid_bytes",
                "max_store_recovery_s",
                "max_client_recovery_s",
                "metadata_bytes",
            ],
            [vec![
                rec.episode.to_string(),
                rec.crash_at_s.to_string(),
                rec.max_log_bytes.to_string(),
                rec.max_log_records.to_string(),
                rec.max_valid_bytes.to_string(),
                format!("{:.4}", rec.max_store_recovery_s),
                format!("{:.4}", rec.max_client_recovery_s),
                rec.metadata_bytes.to_string(),
            ]],
        )?;
    }
    if let Some(m) = &r.micro {
        let mut rows = Vec::new();
        for (name, points) in [
            ("read_pct", &m.read_ratio),
            ("reclaim_random_n", &m.reclaim_random),
            ("reclaim_streaming_n", &m.reclaim_streaming),
            ("stores", &m.stores),
        ] {
            for p in points.iter() {
                rows.push(vec![
                    name.to_owned(),
                    p.x.to_string(),
                    format!("{:.3}", p.offload_mb_per_s),
                    cell(p.baseline_mb_per_s),
                ]);
            }
        }
        write_csv(
            dir,
            "fig13_micro.csv",
            &["experiment", "x", "offload_mb_per_s", "baseline_mb_per_s"],
            rows,
        )?;
    }
    if let Some(o) = &r.oltp {
        let rows = [
            ("figure9", &o.figure9),
            ("figure11_stores", &o.figure11_stores),
            ("figure11_clients", &o.figure11_clients),
            ("figure12", &o.figure12),
        ]
        .into_iter()
        .flat_map(|(figure, bars)| {
            bars.iter().map(move |b| {
                vec![
                    figure.to_owned(),
                    b.config.clone(),
                    format!("{:.1}", b.iops),
                    format!("{:.4}", b.over_baseline),
                    b.paper.clone(),
                ]
            })
        });
        write_csv(
            dir,
            "fig9_11_12_oltp.csv",
            &["figure", "config", "iops", "over_baseline", "paper"],
            rows,
        )?;
    }
    Ok(())
}

/// Over several seeds: Figure 5's mean response times (bar: mean over the seeds; whisker: the
/// seeds' minimum to maximum) and the peak off-load speed-up per episode.
pub fn spread_svgs(dir: &Path, reports: &[Report], rows: &[crate::spread::Spread]) -> Result<()> {
    use super::plots::{ranged_bars, Bar};
    let ranks: Vec<usize> = {
        let mut r: Vec<usize> = reports
            .iter()
            .flat_map(|r| r.episodes.iter().map(|e| e.rank))
            .collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    let bar = |key: String| {
        rows.iter().find(|r| r.key == key).map(|r| Bar {
            value: r.mean,
            low: r.min,
            high: r.max,
        })
    };
    let groups: Vec<String> = ranks.iter().map(|k| format!("episode {k}")).collect();
    let series: Vec<(String, Vec<Option<Bar>>)> = [
        ("baseline", "baseline"),
        ("always off-load", "always"),
        ("peak off-load", "peak"),
    ]
    .iter()
    .map(|(name, key)| {
        (
            name.to_string(),
            ranks
                .iter()
                .map(|k| bar(format!("episode{k}/{key}/mean_ms")))
                .collect(),
        )
    })
    .collect();
    ranged_bars(
        &dir.join("fig5_spread.svg"),
        &format!(
            "Mean response time over {} seeds; whiskers: the seeds' min to max (Everest Fig. 5)",
            reports.len()
        ),
        "mean response time, ms (log scale)",
        true,
        &groups,
        &series,
    )?;
    let gains: Vec<(String, Vec<Option<Bar>>)> =
        [("peak off-load", "peak"), ("always off-load", "always")]
            .iter()
            .map(|(name, key)| {
                (
                    name.to_string(),
                    ranks
                        .iter()
                        .map(|k| bar(format!("episode{k}/{key}/speedup")))
                        .collect(),
                )
            })
            .collect();
    ranged_bars(
        &dir.join("speedup_spread.svg"),
        &format!(
            "Speed-up over the baseline, {} seeds; whiskers: min to max",
            reports.len()
        ),
        "baseline mean / configuration mean (log scale)",
        true,
        &groups,
        &gains,
    )
}

/// Writes each seed's outputs (`seed-N/`), `spread.csv`, `spread.json` and the spread's SVG.
pub fn write_seed_files(
    dir: &Path,
    reports: &[Report],
    rows: &[crate::spread::Spread],
) -> Result<()> {
    for r in reports {
        write_outputs(&dir.join(format!("seed-{}", r.seed)), r)?;
    }
    std::fs::write(dir.join("spread.csv"), crate::spread::csv(rows))?;
    std::fs::write(dir.join("spread.json"), serde_json::to_string_pretty(rows)?)?;
    spread_svgs(dir, reports, rows)
}

/// The runs over seeds as text: each seed's episodes and notices, then the spread's table.
pub fn seeds_text(
    reports: &[Report],
    rows: &[crate::spread::Spread],
    workload_seeded: bool,
) -> String {
    let mut out = format!(
        "Everest §4.1 over {} seeds ({}–{}){}\n",
        reports.len(),
        reports.first().map_or(0, |r| r.seed),
        reports.last().map_or(0, |r| r.seed),
        if workload_seeded {
            ": each seed draws its own workload and simulation"
        } else {
            ": one trace, each seed its own simulation"
        }
    );
    for r in reports {
        let episodes: Vec<String> = r
            .episodes
            .iter()
            .map(|e| {
                format!(
                    "{:.0}–{:.0} s (peak {:.0}–{:.0} s{})",
                    e.start_s,
                    e.end_s,
                    e.peak_start_s,
                    e.peak_end_s,
                    if e.peak_whole { "" } else { ", CUT" }
                )
            })
            .collect();
        out.push_str(&format!(
            "  seed {}: episodes {}\n",
            r.seed,
            episodes.join(", ")
        ));
        for n in &r.notices {
            out.push_str(&format!("    notice: {n}\n"));
        }
    }
    out.push('\n');
    out.push_str(&crate::spread::table(rows, reports.len()));
    out
}

/// Runs over several seeds as JSON: the seeds, whether the workload followed them, the spread
/// and every run's report.
pub fn seeds_json(
    reports: &[Report],
    rows: &[crate::spread::Spread],
    workload_seeded: bool,
) -> serde_json::Value {
    serde_json::json!({
        "seeds": reports.iter().map(|r| r.seed).collect::<Vec<u64>>(),
        "workload_seeded": workload_seeded,
        "spread": rows,
        "runs": reports,
    })
}
