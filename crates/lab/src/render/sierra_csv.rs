//! `lab sierra`'s CSV files (the csv crate's quoting), one per figure and table.

use std::path::Path;

use anyhow::Result;

use crate::render::write_csv;
use crate::sierra::Report;

pub(super) fn write_csvs(dir: &Path, r: &Report) -> Result<()> {
    analysis_csvs(dir, r)?;
    testbed_csvs(dir, r)?;
    micro_csvs(dir, r)
}

/// The analysis of the load traces: Figures 1, 2, 8, 9 (gears and power) and 10.
fn analysis_csvs(dir: &Path, r: &Report) -> Result<()> {
    let csv = |name: &str, header: &[&str], rows: Vec<Vec<String>>| -> Result<()> {
        write_csv(dir, name, header, rows)
    };
    let t = &r.load_traces;
    csv(
        "figure1_load.csv",
        &["trace", "hour", "hour_of_day", "normalized"],
        t.iter()
            .flat_map(|t| {
                t.load.iter().map(|h| {
                    row![
                        t.name,
                        h.hour,
                        h.hour_of_day,
                        format!("{:.6}", h.normalized)
                    ]
                })
            })
            .collect(),
    )?;
    csv(
        "figure2_utilization_cdf.csv",
        &["trace", "utilization", "fraction_of_time"],
        t.iter()
            .flat_map(|t| {
                t.utilization_cdf.iter().map(|p| {
                    row![
                        t.name,
                        format!("{:.2}", p.utilization),
                        format!("{:.6}", p.fraction_of_time)
                    ]
                })
            })
            .collect(),
    )?;
    csv(
        "figure8_prediction.csv",
        &[
            "trace",
            "training_days",
            "rms_error_normalized",
            "gears_correct",
            "test_hours",
        ],
        t.iter()
            .flat_map(|t| {
                t.prediction.iter().map(|p| {
                    row![
                        t.name,
                        p.training_days,
                        format!("{:.6}", p.rms_error_normalized),
                        p.gears_correct,
                        p.test_hours
                    ]
                })
            })
            .collect(),
    )?;
    csv(
        "figure9_oracle.csv",
        &["trace", "g_min", "fraction_on"],
        t.iter()
            .flat_map(|t| {
                t.oracle_fraction_on
                    .iter()
                    .map(|(g, on)| row![t.name, g, format!("{on:.6}")])
            })
            .collect(),
    )?;
    csv(
        "figure10_schedule.csv",
        &[
            "trace",
            "hour",
            "hour_of_day",
            "peak_servers",
            "mean_servers",
            "g_min",
            "gear",
        ],
        r.schedules
            .iter()
            .flat_map(|s| {
                s.hours.iter().flat_map(move |h| {
                    s.g_mins.iter().zip(&h.gears).map(move |(g_min, gear)| {
                        row![
                            s.name,
                            h.hour,
                            h.hour_of_day,
                            format!("{:.4}", h.peak_servers),
                            format!("{:.4}", h.mean_servers),
                            g_min,
                            gear
                        ]
                    })
                })
            })
            .collect(),
    )?;
    csv(
        "figure9_power.csv",
        &[
            "trace",
            "g_min",
            "chunk_servers_on",
            "with_loggers_over_baseline",
            "chunk_servers_over_baseline",
            "hours_in_top_gear",
            "gear_changes",
        ],
        r.schedules
            .iter()
            .flat_map(|s| {
                s.power.iter().map(|p| {
                    row![
                        s.name,
                        p.g_min,
                        format!("{:.6}", p.chunk_servers_on),
                        format!("{:.6}", p.with_loggers_over_baseline),
                        format!("{:.6}", p.chunk_servers_over_baseline),
                        p.hours_in_top_gear,
                        p.gear_changes
                    ]
                })
            })
            .collect(),
    )?;
    Ok(())
}

/// The testbed: Figure 11, Table 2 and the power run's logged load (nothing without it).
fn testbed_csvs(dir: &Path, r: &Report) -> Result<()> {
    let csv = |name: &str, header: &[&str], rows: Vec<Vec<String>>| -> Result<()> {
        write_csv(dir, name, header, rows)
    };
    if !r.testbed.is_empty() {
        let opt = super::format::cell;
        csv(
            "figure11_testbed.csv",
            &[
                "trace",
                "experiment",
                "from_s",
                "to_s",
                "gear_before",
                "gear_after",
                "config",
                "servers",
                "loggers",
                "requests",
                "mean_ms",
                "p99_ms",
                "failed",
                "client_retries",
                "migrations",
                "migration_ms_total",
                "logged_bytes_at_start",
                "reclaimed_bytes",
                "reclaim_mb_per_s",
                "logger_queue_mean",
                "local_reads",
                "logger_reads",
                "reclaim_local_bytes",
            ],
            r.testbed
                .iter()
                .flat_map(|t| {
                    t.experiments.iter().flat_map(move |e| {
                        e.runs.iter().map(move |run| {
                            row![
                                t.trace,
                                e.name,
                                e.from_s,
                                e.to_s,
                                e.gears.0,
                                e.gears.1,
                                run.config,
                                run.servers,
                                run.loggers,
                                run.requests,
                                opt(run.latency.mean_ms),
                                opt(run.latency.p99_ms),
                                run.failed,
                                run.client_retries,
                                run.migrations,
                                format!("{:.4}", run.migration_ns_total as f64 / 1e6),
                                run.logged_bytes_at_start,
                                run.reclaimed_bytes,
                                opt(run.reclaim_mb_per_s),
                                format!("{:.4}", run.logger_queue_mean),
                                run.local_reads,
                                run.logger_reads,
                                run.reclaim_local_bytes
                            ]
                        })
                    })
                })
                .collect(),
        )?;
        csv(
            "table2_reclaim_need.csv",
            &[
                "trace",
                "logged_bytes_total",
                "written_bytes_total",
                "trace_written_bytes",
                "trace_read_bytes",
                "hours_in_top_gear",
                "required_mb_per_s",
                "largest_stretch_bytes",
            ],
            r.testbed
                .iter()
                .map(|t| {
                    let n = &t.need;
                    row![
                        t.trace,
                        n.logged_bytes_total,
                        n.written_bytes_total,
                        n.trace_written_bytes,
                        n.trace_read_bytes,
                        n.hours_in_top_gear,
                        format!("{:.4}", n.required_mb_per_s),
                        n.largest_bytes
                    ]
                })
                .collect(),
        )?;
        let hourly: Vec<Vec<String>> = r
            .testbed
            .iter()
            .flat_map(|t| {
                t.experiments
                    .iter()
                    .filter(|e| e.name == "power")
                    .flat_map(move |e| {
                        e.runs.iter().flat_map(move |run| {
                            run.logged_hourly
                                .iter()
                                .map(move |(hour, bytes)| row![t.trace, run.config, hour, bytes])
                        })
                    })
            })
            .collect();
        if !hourly.is_empty() {
            csv(
                "power_logged_hourly.csv",
                &["trace", "config", "trace_hour", "logged_bytes"],
                hourly,
            )?;
        }
    }
    Ok(())
}

/// Table 5 and Figure 12 (nothing without the micro part).
fn micro_csvs(dir: &Path, r: &Report) -> Result<()> {
    let csv = |name: &str, header: &[&str], rows: Vec<Vec<String>>| -> Result<()> {
        write_csv(dir, name, header, rows)
    };
    if let Some(m) = &r.micro {
        csv(
            "table5.csv",
            &[
                "workload",
                "unit",
                "aggregate",
                "ideal",
                "per_client_min",
                "per_client_max",
                "paper",
                "paper_ideal",
                "failed",
                "client_timeouts",
            ],
            m.table5
                .iter()
                .map(|row| {
                    row![
                        row.workload,
                        row.unit,
                        format!("{:.2}", row.aggregate),
                        format!("{:.2}", row.ideal),
                        format!("{:.2}", row.per_client_min),
                        format!("{:.2}", row.per_client_max),
                        row.paper,
                        row.paper_ideal,
                        row.failed,
                        row.client_timeouts
                    ]
                })
                .collect(),
        )?;
        if !m.causes.is_empty() {
            csv(
                "table5_causes.csv",
                &[
                    "variant",
                    "clients",
                    "outstanding",
                    "read_ahead_bytes",
                    "read_ahead_async",
                    "cut_through",
                    "mb_per_s",
                    "per_client_min",
                    "per_client_max",
                    "mean_ms",
                    "median_ms",
                    "disk_busy",
                ],
                m.causes
                    .iter()
                    .map(|c| {
                        row![
                            c.variant,
                            c.setup.clients,
                            c.setup.streaming_outstanding,
                            c.setup
                                .read_ahead_bytes
                                .map_or("preset".to_owned(), |b| b.to_string()),
                            c.setup.read_ahead_async,
                            c.setup.cut_through,
                            format!("{:.2}", c.aggregate),
                            format!("{:.2}", c.per_client_min),
                            format!("{:.2}", c.per_client_max),
                            format!("{:.3}", c.mean_ms),
                            format!("{:.3}", c.median_ms),
                            format!("{:.3}", c.disk_busy)
                        ]
                    })
                    .collect(),
            )?;
        }
        csv(
            "figure12_rebuild.csv",
            &[
                "chunk_bytes",
                "servers",
                "write_servers",
                "rebuilt_bytes",
                "seconds",
                "mb_per_s",
            ],
            m.figure12
                .iter()
                .map(|p| {
                    row![
                        p.chunk_bytes,
                        p.servers,
                        p.write_servers,
                        p.rebuilt_bytes,
                        format!("{:.2}", p.seconds),
                        format!("{:.3}", p.mb_per_s)
                    ]
                })
                .collect(),
        )?;
    }
    Ok(())
}
