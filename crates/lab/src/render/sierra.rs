//! `lab sierra`'s report: the terminal table, CSV files and SVG figures.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use crate::render::plots::{bars, chart, Series};
use crate::render::writer;
use crate::sierra::testbed::TestbedReport;
use crate::sierra::Report;

/// The paper's gear accuracy after 6 days of training (§4.1), by the name of a workload that
/// stands for its trace.
fn paper_gears_correct(name: &str) -> &'static str {
    if name.starts_with("hotmail") {
        "Hotmail 100 %"
    } else if name.contains("msr") || name.contains("cambridge") {
        "Cambridge 75 %"
    } else {
        "Hotmail 100 %, Messenger 90 %, Cambridge 75 %"
    }
}

pub fn table(r: &Report) -> String {
    let mut out = String::new();
    let s = &r.server;
    let _ = writeln!(
        out,
        "Chunk server ({}; Table 4: 137 read / 179 write IOPS, 82 / 82 MB/s): {:.0} read / {:.0} write IOPS, {:.1} / {:.1} MB/s",
        r.server_preset,
        s.read_iops,
        s.write_iops,
        s.read_bytes_per_s / 1048576.0,
        s.write_bytes_per_s / 1048576.0
    );
    for t in &r.load_traces {
        let _ = writeln!(
            out,
            "\nLoad trace {} ({} records, {} whole days; hourly bytes, §4.1)",
            t.name, t.records, t.whole_days
        );
        let _ = writeln!(out, "  Figure 8: trained on n days, tested on the rest");
        let _ = writeln!(out, "     n   RMS error / mean   gears correct");
        for p in &t.prediction {
            let _ = writeln!(
                out,
                "  {:>4}   {:>16.3}   {:>6.1} % ({}/{})",
                p.training_days,
                p.rms_error_normalized,
                100.0 * p.gears_correct_fraction(),
                p.gears_correct,
                p.test_hours
            );
        }
        if let Some(p) = t.prediction.iter().find(|p| p.training_days == 6) {
            let _ = writeln!(
                out,
                "  6 days of training: {:.0} % of gears correct (paper: {})",
                100.0 * p.gears_correct_fraction(),
                paper_gears_correct(&t.name)
            );
        }
        let _ = write!(out, "  Figure 9 (left), oracle gears: servers on");
        for (g_min, on) in &t.oracle_fraction_on {
            let _ = write!(
                out,
                "   g_min {g_min}: {:.1} % (saves {:.1} %)",
                100.0 * on,
                100.0 * (1.0 - on)
            );
        }
        let _ = writeln!(out, "   (paper: savings up to 60 %, Cambridge)");
        let _ = write!(out, "  Figure 2, time at or below a fraction of the peak:");
        for p in t.utilization_cdf.iter().step_by(4) {
            let _ = write!(
                out,
                "  {:.1}: {:.0} %",
                p.utilization,
                100.0 * p.fraction_of_time
            );
        }
        let _ = writeln!(out);
    }
    for sch in &r.schedules {
        schedule_table(&mut out, sch);
    }
    if let Some(m) = &r.mds_state {
        let _ = writeln!(
            out,
            "\nMDS state (§4.5: about 100 MB for 320 groups and 4.6 M chunks, 23 bytes per chunk): {:.1} MB for {} groups and {} chunks of {} MiB in {} objects → {:.1} bytes per chunk",
            m.size.bytes as f64 / 1e6,
            m.size.groups,
            m.size.chunks,
            m.chunk_bytes >> 20,
            m.objects,
            m.size.bytes_per_chunk
        );
    }
    predictors_table(&mut out, &r.predictors);
    for t in &r.testbed {
        testbed_table(&mut out, t);
    }
    if let Some(m) = &r.micro {
        super::sierra_micro::micro_table(&mut out, m);
    }
    for why in &r.skipped {
        let _ = writeln!(out, "\nnot judged: {why}");
    }
    out
}

/// One I/O trace's schedule (Figure 10) and the power it implies (Figure 9 right), with the
/// power model's sensitivity.
fn schedule_table(out: &mut String, sch: &crate::sierra::analysis::ScheduleReport) {
    let _ = writeln!(
        out,
        "\nI/O trace {} ({} records): load metric L in chunk servers, oracle gears (Figure 10)",
        sch.name, sch.records
    );
    let _ = writeln!(
        out,
        "  peak L outside maintenance {:.2}, in maintenance {:.2} → N = {} chunk servers (paper: 15) + {} loggers",
        sch.peak_servers_max, sch.peak_servers_max_maintenance, sch.chunk_servers, sch.loggers
    );
    let gear_names: Vec<String> = sch
        .g_mins
        .iter()
        .map(|g| format!("g (g_min {g})"))
        .collect();
    let _ = writeln!(
        out,
        "  hour  day:h   peak L   mean L   {}",
        gear_names.join("  ")
    );
    for h in &sch.hours {
        let gears: Vec<String> = h.gears.iter().map(|g| format!("{g:>11}")).collect();
        let _ = writeln!(
            out,
            "  {:>4}  {:>2}:{:02}  {:>7.2}  {:>7.2}  {}",
            h.hour,
            h.hour.div_euclid(24),
            h.hour_of_day,
            h.peak_servers,
            h.mean_servers,
            gears.join("  ")
        );
    }
    let _ = writeln!(
        out,
        "  Power (estimate from the schedule; Figure 9 right — paper: at least 23 % saved with g_min 1, loggers included):"
    );
    for p in &sch.power {
        let _ = writeln!(
            out,
            "    g_min {}: chunk servers on {:.1} %; energy vs baseline: {:.1} % with loggers (saves {:.1} %), chunk servers alone {:.1} % (saves {:.1} %); {} h in the top gear (paper: 14 h in 48 h), {} gear changes",
            p.g_min,
            100.0 * p.chunk_servers_on,
            100.0 * p.with_loggers_over_baseline,
            100.0 * (1.0 - p.with_loggers_over_baseline),
            100.0 * p.chunk_servers_over_baseline,
            100.0 * (1.0 - p.chunk_servers_over_baseline),
            p.hours_in_top_gear,
            p.gear_changes
        );
    }
    if let Some(first) = sch.sensitivity.first() {
        let _ = writeln!(
            out,
            "  Sensitivity (g_min {}; active {:.0} W; the model's 150 W idle and 10 W standby are assumed: the paper gives no wattages): saved with loggers / chunk servers alone",
            sch.g_mins[0], first.active_w
        );
        let _ = write!(out, "    idle \\ standby");
        for w in crate::sierra::analysis::SENSITIVITY_STANDBY_W {
            let _ = write!(out, " {:>16}", format!("{w:.0} W"));
        }
        for row in sch
            .sensitivity
            .chunks(crate::sierra::analysis::SENSITIVITY_STANDBY_W.len())
        {
            let _ = write!(out, "\n    {:>6.0} W      ", row[0].idle_w);
            for c in row {
                let _ = write!(
                    out,
                    " {:>16}",
                    format!(
                        "{:.1} / {:.1} %",
                        100.0 * c.saved_with_loggers,
                        100.0 * c.saved_chunk_servers
                    )
                );
            }
        }
        let _ = writeln!(out);
    }
}

/// The hour-of-day predictor against the baselines, workload by workload.
fn predictors_table(out: &mut String, workloads: &[crate::sierra::predictors::WorkloadScores]) {
    if workloads.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nPredictors (§3.4's hour of day against baselines; each day predicted from the days before it; Figure 8's error, gears with N = r servers at the busiest hour)"
    );
    for w in workloads {
        let _ = writeln!(
            out,
            "  {}: {} days, days {}–{} predicted",
            w.workload,
            w.days,
            w.first_test_day,
            w.days - 1
        );
        let _ = writeln!(
            out,
            "    {:<22} {:>11} {:>14} {:>7} {:>7} {:>13}",
            "predictor", "RMS / mean", "gears right", "under", "over", "servers on"
        );
        for s in &w.scores {
            if s.predicted_hours == 0 {
                let _ = writeln!(
                    out,
                    "    {:<22} cannot predict: no earlier day at that distance (every hour in gear r)",
                    s.predictor.name()
                );
                continue;
            }
            let _ = writeln!(
                out,
                "    {:<22} {:>11} {:>8.1} %    {:>7} {:>7} {:>11.1} %",
                s.predictor.name(),
                if s.predicted_hours == 0 {
                    "-".to_string()
                } else {
                    format!("{:.3}", s.rms_error_normalized)
                },
                100.0 * s.gears_correct as f64 / s.test_hours.max(1) as f64,
                s.hours_under_geared,
                s.hours_over_geared,
                100.0 * s.fraction_on
            );
        }
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn testbed_table(out: &mut String, t: &TestbedReport) {
    testbed_runs_text(out, t);
    testbed_need_text(out, t);
    testbed_power_text(out, t);
}

/// The testbed's setup and each window's runs (Figure 11).
fn testbed_runs_text(out: &mut String, t: &TestbedReport) {
    let _ = writeln!(
        out,
        "\nTestbed (§4.4–4.5) on {}: Sierra = {} chunk servers + {} loggers, g_min {}; baseline = {} chunk servers, no loggers, top gear; each window replayed from {} s before it (not measured; the paper replays up to 8 h)",
        t.trace,
        t.chunk_servers,
        t.loggers,
        t.options.g_min,
        t.chunk_servers + t.loggers,
        t.options.preface_s
    );
    if !t.maintenance_hours.is_empty() {
        let hours: Vec<String> = t.maintenance_hours.iter().map(|h| h.to_string()).collect();
        let _ = writeln!(
            out,
            "  windows {} the maintenance hours ({} of each day: top gear by design, above the load N is provisioned for){}",
            if t.options.maintenance_windows { "may fall in" } else { "chosen outside" },
            hours.join(", "),
            if t.options.maintenance_windows { "" } else { " when one qualifies; --windows-in-maintenance to allow them" }
        );
        for e in t.experiments.iter().filter(|e| e.in_maintenance) {
            let _ = writeln!(
                out,
                "  note: the {} window lies in the maintenance hours{}",
                e.name,
                if t.options.maintenance_windows {
                    ""
                } else {
                    " (no window of its kind qualifies outside them)"
                }
            );
        }
    }
    let _ = writeln!(
        out,
        "  Figure 11: response times (paper: a small penalty for Sierra, the up-shift worst; it gives no figures)"
    );
    let _ = writeln!(
        out,
        "    experiment   trace window (h)   gears   config     requests   mean ms    p99 ms   failed   retries"
    );
    for e in t.experiments.iter().filter(|e| e.name != "power") {
        for run in &e.runs {
            let _ = writeln!(
                out,
                "    {:<10}   {:>6.2} – {:<6.2}    {} → {}   {:<8}  {:>9}  {:>8}  {:>8}  {:>7}  {:>8}",
                e.name,
                e.from_s as f64 / 3600.0,
                e.to_s as f64 / 3600.0,
                e.gears.0,
                e.gears.1,
                run.config,
                run.requests,
                ms(run.latency.mean_ms),
                ms(run.latency.p99_ms),
                run.failed,
                run.client_retries
            );
            for p in &run.phases {
                let _ = writeln!(
                    out,
                    "      {:<26} {:>6.2} – {:<6.2}                      {:>9}  {:>8}  {:>8}",
                    p.phase,
                    p.from_s as f64 / 3600.0,
                    p.to_s as f64 / 3600.0,
                    p.latency.count,
                    ms(p.latency.mean_ms),
                    ms(p.latency.p99_ms)
                );
            }
        }
    }
}

/// What the Sierra runs needed (Table 2) and the shifts' figures beside the paper's.
fn testbed_need_text(out: &mut String, t: &TestbedReport) {
    let sierra = |name: &str| {
        t.experiments
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.runs.iter().find(|r| r.config == "sierra"))
    };
    let n = &t.need;
    let _ = writeln!(
        out,
        "  Table 2: reclaim                                  ours        paper"
    );
    let _ = writeln!(
        out,
        "    data logged in the trace (unique, below top gear)  {:>8.1} GB   166 GB",
        n.logged_bytes_total as f64 / 1e9
    );
    let _ = writeln!(
        out,
        "      written below top gear, overwrites included  {:>8.1} GB   (the trace: {:.1} GB written, {:.1} GB read)",
        n.written_bytes_total as f64 / 1e9,
        n.trace_written_bytes as f64 / 1e9,
        n.trace_read_bytes as f64 / 1e9
    );
    let _ = writeln!(
        out,
        "    time in top gear                            {:>8} h     14 h",
        n.hours_in_top_gear
    );
    let _ = writeln!(
        out,
        "    required reclaim rate                       {:>8.2} MB/s  3.4 MB/s",
        n.required_mb_per_s
    );
    if let Some(u) = sierra("up-shift") {
        let _ = writeln!(
            out,
            "    data logged at the up-shift window's start  {:>8.2} GB   (22 GB reclaimed)",
            u.logged_bytes_at_start as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "    data reclaimed in the up-shift window       {:>8.2} GB   22 GB",
            u.reclaimed_bytes as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "    achieved reclaim rate                       {:>8} MB/s  6.3 MB/s{}",
            u.reclaim_mb_per_s.map_or("-".into(), |r| format!("{r:.2}")),
            u.reclaim_done_after_s.map_or(
                String::from(" (not drained by the window's end)"),
                |s| format!(" (drained {s:.0} s after the shift)")
            )
        );
        let _ = writeln!(
            out,
            "    logger mean disk queue, reclaim             {:>8.2}       2.3",
            u.logger_queue_mean
        );
        let _ = writeln!(
            out,
            "    §3.6 local copies: reads of logged data from the primary's replica {} / from loggers {}; reclaimed without rewriting it {:.2} GB",
            u.local_reads,
            u.logger_reads,
            u.reclaim_local_bytes as f64 / 1e9
        );
    }
    if let Some(s) = sierra("steady") {
        let _ = writeln!(
            out,
            "    logger mean disk queue, steady state        {:>8.2}       0.09",
            s.logger_queue_mean
        );
    }
    if let Some(d) = sierra("down-shift") {
        let _ = writeln!(
            out,
            "  Table 3: down-shift: {} primary migrations (paper 102); each group without a primary {:.2} ms on average, {:.2} ms at most, {:.2} ms in all (paper: 28 ms in all); the shift's migrations spanned {:.1} ms; {} client retries of {} requests (paper: 77 of 254,536)",
            d.migrations,
            if d.migrations == 0 { 0.0 } else { d.migration_ns_total as f64 / 1e6 / d.migrations as f64 },
            d.migration_ns_max as f64 / 1e6,
            d.migration_ns_total as f64 / 1e6,
            d.migration_span_ns as f64 / 1e6,
            d.client_retries,
            d.requests
        );
    }
}

/// The power run, and every failed request.
fn testbed_power_text(out: &mut String, t: &TestbedReport) {
    if let Some(p) = t.experiments.iter().find(|e| e.name == "power") {
        let run = |c: &str| p.runs.iter().find(|r| r.config == c);
        if let (Some(s), Some(b)) = (run("sierra"), run("baseline")) {
            let ratio = s.energy_j / b.energy_j.max(1e-9);
            // The chunk servers alone against as many chunk servers always on (§4.4's last
            // bars): measured on N servers when that baseline ran, else the baseline's
            // chunk-server energy scaled to Sierra's N (an estimate, said so).
            let (alone, alone_how) = match run("baseline-n") {
                Some(n) => (
                    s.chunk_server_energy_j / n.chunk_server_energy_j.max(1e-9),
                    "measured",
                ),
                None => (
                    s.chunk_server_energy_j
                        / (b.chunk_server_energy_j * s.servers as f64 / b.servers.max(1) as f64)
                            .max(1e-9),
                    "scaled from the baseline",
                ),
            };
            // Each day's lowest logged bytes: after the top gear's reclaim.
            let mut lowest: Vec<(i64, u64)> = Vec::new();
            for &(hour, bytes) in &s.logged_hourly {
                let day = hour.div_euclid(24);
                match lowest.last_mut() {
                    Some((d, b)) if *d == day => *b = (*b).min(bytes),
                    _ => lowest.push((day, bytes)),
                }
            }
            let lowest = lowest
                .iter()
                .map(|(d, b)| format!("day {d} {:.2} GB", *b as f64 / 1e9))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                out,
                "  Figure 9 (right), measured: the whole trace ({:.0} h) replayed with one request in {} on Sierra and on the baseline: energy {:.1} % of the baseline's (saves {:.1} %; paper: at least 23 % with g_min 1), chunk servers alone {:.1} % of {} always on, {alone_how} (saves {:.1} %); chunk servers in standby {:.1} % of the time; {} and {} requests, {} and {} failed; logged at the end of each day: {}; lowest in each day (after the top gear's reclaim): {lowest}",
                (p.to_s - p.from_s) as f64 / 3600.0,
                s.sample,
                100.0 * ratio,
                100.0 * (1.0 - ratio),
                100.0 * alone,
                s.servers,
                100.0 * (1.0 - alone),
                100.0 * s.asleep_fraction,
                s.requests,
                b.requests,
                s.failed,
                b.failed,
                s.logged_at_day_end
                    .iter()
                    .map(|b| format!("{:.2} GB", *b as f64 / 1e9))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let failed: u64 = t
        .experiments
        .iter()
        .flat_map(|e| &e.runs)
        .map(|r| r.failed)
        .sum();
    let _ = writeln!(out, "  requests failed in all runs: {failed}");
    for e in &t.experiments {
        for run in &e.runs {
            for f in &run.failures {
                let _ = writeln!(out, "    {} on {}: {f}", e.name, run.config);
            }
        }
    }
}

pub fn write_outputs(dir: &Path, r: &Report) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let write = writer(dir);
    write("report.json", serde_json::to_string_pretty(r)?)?;
    super::sierra_csv::write_csvs(dir, r)?;
    write_svgs(dir, r)
}

fn write_svgs(dir: &Path, r: &Report) -> Result<()> {
    let series = |f: &dyn Fn(&crate::sierra::analysis::LoadTraceReport) -> Vec<(f64, f64)>| {
        r.load_traces
            .iter()
            .map(|t| Series {
                name: t.name.clone(),
                points: f(t),
            })
            .collect::<Vec<_>>()
    };
    chart(
        &dir.join("figure1_load.svg"),
        "Figure 1: load by hour, over the busiest hour",
        "hours from the first midnight",
        "load / peak",
        false,
        &series(&|t| {
            t.load
                .iter()
                .map(|h| (h.hour as f64, h.normalized))
                .collect()
        }),
    )?;
    chart(
        &dir.join("figure2_utilization_cdf.svg"),
        "Figure 2: time at or below each fraction of the peak",
        "load / peak",
        "fraction of hours",
        false,
        &series(&|t| {
            t.utilization_cdf
                .iter()
                .map(|p| (p.utilization, p.fraction_of_time))
                .collect()
        }),
    )?;
    chart(
        &dir.join("figure8_prediction_error.svg"),
        "Figure 8: prediction error after n days of training",
        "training days",
        "RMS error / mean load",
        false,
        &series(&|t| {
            t.prediction
                .iter()
                .map(|p| (p.training_days as f64, p.rms_error_normalized))
                .collect()
        }),
    )?;
    for t in &r.testbed {
        let shown: Vec<_> = t.experiments.iter().filter(|e| e.name != "power").collect();
        let groups: Vec<String> = shown.iter().map(|e| e.name.to_string()).collect();
        let mut series = Vec::new();
        for config in ["sierra", "baseline"] {
            for (what, pick) in [
                (
                    "mean",
                    (|l: &cordillera_models::histogram::LatencySummary| l.mean_ms) as fn(&_) -> _,
                ),
                ("p99", |l| l.p99_ms),
            ] {
                series.push((
                    format!("{config} {what}"),
                    shown
                        .iter()
                        .map(|e| {
                            e.runs
                                .iter()
                                .find(|r| r.config == config)
                                .and_then(|r| pick(&r.latency))
                        })
                        .collect(),
                ));
            }
        }
        bars(
            &dir.join(format!("figure11_testbed_{}.svg", file_name(&t.trace))),
            &format!("Figure 11: response times on the testbed, {}", t.trace),
            "ms",
            &groups,
            &series,
        )?;
    }
    if let Some(m) = &r.micro {
        let lines: Vec<Series> = [1u64 << 20, 64 << 20]
            .iter()
            .map(|&c| Series {
                name: format!("{} MB chunks", c >> 20),
                points: m
                    .figure12
                    .iter()
                    .filter(|p| p.chunk_bytes == c)
                    .map(|p| (p.write_servers as f64, p.mb_per_s))
                    .collect(),
            })
            .collect();
        chart(
            &dir.join("figure12_rebuild.svg"),
            "Figure 12: rebuild rate",
            "servers written to",
            "MB/s",
            false,
            &lines,
        )?;
    }
    for s in &r.schedules {
        let mut lines = vec![Series {
            name: "peak L (servers)".into(),
            points: s
                .hours
                .iter()
                .map(|h| (h.hour as f64, h.peak_servers))
                .collect(),
        }];
        for (i, g_min) in s.g_mins.iter().enumerate() {
            lines.push(Series {
                name: format!("servers on, g_min {g_min}"),
                points: s
                    .hours
                    .iter()
                    .map(|h| {
                        (
                            h.hour as f64,
                            (s.chunk_servers * h.gears[i] / r.options.replicas) as f64,
                        )
                    })
                    .collect(),
            });
        }
        let file = format!("figure10_schedule_{}.svg", file_name(&s.name));
        chart(
            &dir.join(file),
            &format!("Figure 10: load and gears, {}", s.name),
            "hour",
            "chunk servers",
            false,
            &lines,
        )?;
    }
    Ok(())
}

fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Runs over several seeds: the spread of their headline figures written as `spread.csv` and
/// `spread.json` into `dir`.
pub fn write_spread_files(dir: &Path, seeds: &[u64], rows: &[crate::spread::Spread]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("spread.csv"), crate::spread::csv(rows))?;
    std::fs::write(
        dir.join("spread.json"),
        serde_json::to_string_pretty(&serde_json::json!({ "seeds": seeds, "spread": rows }))?,
    )?;
    Ok(())
}

/// The spread over `seeds` as a table, under a line saying what it is.
pub fn seeds_text(seeds: &[u64], rows: &[crate::spread::Spread]) -> String {
    format!(
        "lab sierra over {} seeds ({}–{}): each headline figure's mean, range and sample standard deviation\n{}",
        seeds.len(),
        seeds.first().copied().unwrap_or(0),
        seeds.last().copied().unwrap_or(0),
        crate::spread::table(rows, seeds.len())
    )
}
