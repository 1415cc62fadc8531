//! `lab sierra`'s report: the terminal table, CSV files and SVG figures.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use crate::render::plots::{chart, Series};
use crate::render::writer;
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
    }
    let m = &r.mds_state;
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
    for why in &r.skipped {
        let _ = writeln!(out, "\nnot judged: {why}");
    }
    out
}

pub fn write_outputs(dir: &Path, r: &Report) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let write = writer(dir);
    write("report.json", serde_json::to_string_pretty(r)?)?;
    let mut load = String::from("trace,hour,hour_of_day,normalized\n");
    let mut cdf = String::from("trace,utilization,fraction_of_time\n");
    let mut prediction =
        String::from("trace,training_days,rms_error_normalized,gears_correct,test_hours\n");
    let mut oracle = String::from("trace,g_min,fraction_on\n");
    for t in &r.load_traces {
        for h in &t.load {
            let _ = writeln!(
                load,
                "{},{},{},{:.6}",
                t.name, h.hour, h.hour_of_day, h.normalized
            );
        }
        for p in &t.utilization_cdf {
            let _ = writeln!(
                cdf,
                "{},{:.2},{:.6}",
                t.name, p.utilization, p.fraction_of_time
            );
        }
        for p in &t.prediction {
            let _ = writeln!(
                prediction,
                "{},{},{:.6},{},{}",
                t.name, p.training_days, p.rms_error_normalized, p.gears_correct, p.test_hours
            );
        }
        for (g, on) in &t.oracle_fraction_on {
            let _ = writeln!(oracle, "{},{g},{on:.6}", t.name);
        }
    }
    write("figure1_load.csv", load)?;
    write("figure2_utilization_cdf.csv", cdf)?;
    write("figure8_prediction.csv", prediction)?;
    write("figure9_oracle.csv", oracle)?;
    let mut schedule =
        String::from("trace,hour,hour_of_day,peak_servers,mean_servers,g_min,gear\n");
    let mut power = String::from("trace,g_min,chunk_servers_on,with_loggers_over_baseline,chunk_servers_over_baseline,hours_in_top_gear,gear_changes\n");
    for s in &r.schedules {
        for h in &s.hours {
            for (g_min, gear) in s.g_mins.iter().zip(&h.gears) {
                let _ = writeln!(
                    schedule,
                    "{},{},{},{:.4},{:.4},{g_min},{gear}",
                    s.name, h.hour, h.hour_of_day, h.peak_servers, h.mean_servers
                );
            }
        }
        for p in &s.power {
            let _ = writeln!(
                power,
                "{},{},{:.6},{:.6},{:.6},{},{}",
                s.name,
                p.g_min,
                p.chunk_servers_on,
                p.with_loggers_over_baseline,
                p.chunk_servers_over_baseline,
                p.hours_in_top_gear,
                p.gear_changes
            );
        }
    }
    write("figure10_schedule.csv", schedule)?;
    write("figure9_power.csv", power)?;
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
