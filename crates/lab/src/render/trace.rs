//! `trace stats`, `peaks`, `reaccess` and `profile` as text tables: one function per report,
//! each returning what the command prints.

use std::fmt::Write;

use cordillera_trace::peaks::PeaksReport;
use cordillera_trace::profile::ProfileReport;
use cordillera_trace::reaccess::ReaccessReport;
use cordillera_trace::stats::TraceStats;
use cordillera_types::units::format_unix_ns;

use super::format::opt;

fn utc(unix_ns: Option<i64>) -> String {
    unix_ns.map_or_else(String::new, format_unix_ns)
}

pub fn stats_text(stats: &TraceStats) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "{:<14} {:>10} {:>6} {:>10} {:>10} {:>8} {:>9} {:>9} {:>7} {:>9} {:>7} {:>8}",
        "volume",
        "records",
        "read%",
        "read_GiB",
        "write_GiB",
        "span_h",
        "mean/s",
        "peak/s",
        "pk:mean",
        "wss_GiB",
        "reacc%",
        "mean_KiB"
    )
    .unwrap();
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    for v in stats.volumes.iter().chain(std::iter::once(&stats.total)) {
        writeln!(out,
            "{:<14} {:>10} {:>6.1} {:>10.3} {:>10.3} {:>8.2} {:>9} {:>9.2} {:>7} {:>9.3} {:>7} {:>8}",
            v.volume,
            v.records,
            if v.records > 0 { 100.0 * v.reads as f64 / v.records as f64 } else { 0.0 },
            gib(v.read_bytes),
            gib(v.write_bytes),
            v.span_s / 3600.0,
            opt(v.mean_rate_per_s, 2),
            v.peak_rate_per_s,
            opt(v.peak_to_mean, 1),
            gib(v.wss_bytes),
            opt(v.reaccess_pct, 1),
            opt(v.mean_request_bytes.map(|b| b / 1024.0), 1),
        ).unwrap();
    }
    writeln!(out, "(peak rate over {} s windows)", stats.window_s).unwrap();
    out
}

pub fn peaks_text(report: &PeaksReport) -> String {
    let mut out = String::new();
    match report.align {
        cordillera_trace::peaks::EpisodeAlign::Grid => writeln!(out,
            "Peak episodes (rates over {} s windows; episode = peak's {} s segment + following)",
            report.rate_window_s, report.segment_s
        ).unwrap(),
        cordillera_trace::peaks::EpisodeAlign::Centred => writeln!(out,
            "Peak episodes (rates over {} s windows; episodes of the segments' length or the peak's, centred on the peak)",
            report.rate_window_s
        ).unwrap(),
    }
    writeln!(
        out,
        "{:>2}  {:<41} {:>10} {:>6} {:>12}  {:<14} {:>7}",
        "#", "time", "requests", "read%", "peak req/s", "busiest", "share%"
    )
    .unwrap();
    for e in &report.episodes {
        let time = match (e.start_unix_ns, e.end_unix_ns) {
            (Some(s), Some(t)) => format!("{} – {}", format_unix_ns(s), &format_unix_ns(t)[11..]),
            _ => format!("{:.0} s – {:.0} s", e.start_s, e.end_s),
        };
        writeln!(
            out,
            "{:>2}  {:<41} {:>10} {:>6} {:>12.1}  {:<14} {:>7.1}",
            e.rank,
            time,
            e.requests,
            opt(e.read_pct, 1),
            e.peak_rate_per_s,
            e.busiest_volume,
            e.busiest_share_pct
        )
        .unwrap();
        writeln!(
            out,
            "      peak {:.0} s – {:.0} s{}",
            e.peak_start_s,
            e.peak_end_s,
            if e.peak_whole {
                ""
            } else {
                "  (cut by the episode's bounds: --align centred holds it)"
            }
        )
        .unwrap();
        for v in &e.volumes {
            writeln!(
                out,
                "      {:<14} {:>10} requests  read {:>6}%  peak {:>10.1} req/s",
                v.volume,
                v.requests,
                opt(v.read_pct, 1),
                v.peak_rate_per_s
            )
            .unwrap();
        }
    }
    let s = &report.slow;
    writeln!(out).unwrap();
    if s.intervals_with_response == 0 {
        writeln!(
            out,
            "Writes in slow intervals: the trace records no response times."
        )
        .unwrap();
        return out;
    }
    writeln!(out,
        "Writes in slow intervals ({} s intervals per volume, mean response > {} s): {} of {} intervals slow",
        s.interval_s, s.threshold_s, s.slow_intervals, s.intervals_with_response
    ).unwrap();
    if let Some(p) = s.write_pct_percentiles {
        let text: Vec<String> = p
            .iter()
            .enumerate()
            .map(|(i, v)| format!("p{}={v:.1}", i * 10))
            .collect();
        writeln!(out, "  write % over slow intervals: {}", text.join(" ")).unwrap();
        writeln!(
            out,
            "  slow intervals with < 10 % writes: {}%",
            opt(s.below_10pct_writes_pct, 1)
        )
        .unwrap();
    }
    out
}

pub fn reaccess_text(report: &ReaccessReport) -> String {
    let mut out = String::new();
    if !report.has_time {
        writeln!(
            out,
            "(this trace has no timestamps: temporal classes are not meaningful)"
        )
        .unwrap();
    }
    writeln!(out, "Temporal classes (% of reaccesses; % of reaccessed blocks), reuse distance (% of reaccesses), clustering (% of 1 MiB region)").unwrap();
    writeln!(
        out,
        "{:<14} {:>11} {:>7} {:>13} {:>13} {:>13} {:>7} {:>9} {:>8} {:>7} {:>6} {:>6} {:>6}",
        "volume",
        "accesses",
        "reacc%",
        "hourly",
        "daily",
        "other",
        "<10MiB",
        "<1GiB",
        "<10GiB",
        ">10GiB",
        "cl.h",
        "cl.d",
        "cl.o"
    )
    .unwrap();
    for v in report.volumes.iter().chain(std::iter::once(&report.total)) {
        let class = |i: usize| {
            let c = &v.classes[i];
            format!("{}/{}", opt(c.reaccess_pct, 1), opt(c.block_pct, 1))
        };
        let reuse = |i: usize| opt(v.reuse_distance[i].pct, 1);
        let cluster = |i: usize| opt(v.classes[i].clustering_pct, 1);
        writeln!(
            out,
            "{:<14} {:>11} {:>7} {:>13} {:>13} {:>13} {:>7} {:>9} {:>8} {:>7} {:>6} {:>6} {:>6}",
            v.volume,
            v.block_accesses,
            opt(v.reaccess_pct, 1),
            class(0),
            class(1),
            class(2),
            reuse(0),
            reuse(1),
            reuse(2),
            reuse(3),
            cluster(0),
            cluster(1),
            cluster(2)
        )
        .unwrap();
    }
    let hours = &report.total.daily_by_hour;
    if hours.iter().any(|h| *h > 0) {
        let clock = if report.wall_clock {
            format!("UTC{:+}", report.utc_offset_h)
        } else {
            "since trace start".into()
        };
        writeln!(out, "Daily reaccesses by hour of day ({clock}):").unwrap();
        let text: Vec<String> = hours
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(h, n)| format!("{h:02}h:{n}"))
            .collect();
        writeln!(out, "  {}", text.join(" ")).unwrap();
    }
    out
}

pub fn profile_text(report: &ProfileReport) -> String {
    let mut out = String::new();
    let clock = if report.wall_clock {
        format!("UTC{:+}", report.utc_offset_h)
    } else {
        "hours since trace start".into()
    };
    writeln!(
        out,
        "Load by hour of day ({clock}; mean over days, normalized to the busiest hour):"
    )
    .unwrap();
    writeln!(
        out,
        "{:>4} {:>6} {:>10} {:>12} {:>6}",
        "hour", "days", "IOPS", "MB/s", "norm"
    )
    .unwrap();
    for h in &report.hours_of_day {
        writeln!(
            out,
            "{:>4} {:>6} {:>10.2} {:>12.3} {:>6.2}",
            h.hour,
            h.buckets,
            h.mean_iops,
            h.mean_bytes_per_s / 1e6,
            h.normalized
        )
        .unwrap();
    }
    writeln!(out, "Load by day:").unwrap();
    writeln!(
        out,
        "{:>4} {:<20} {:>12} {:>14} {:>10} {:>12}",
        "day", "start", "requests", "bytes", "IOPS", "MB/s"
    )
    .unwrap();
    for d in &report.days {
        writeln!(
            out,
            "{:>4} {:<20} {:>12} {:>14} {:>10.2} {:>12.3}",
            d.day,
            utc(d.start_unix_ns),
            d.requests,
            d.bytes,
            d.mean_iops,
            d.mean_bytes_per_s / 1e6
        )
        .unwrap();
    }
    writeln!(
        out,
        "Peak-to-mean (bytes, {} s buckets): {}",
        report.bucket_s,
        opt(report.peak_to_mean_bytes, 2)
    )
    .unwrap();
    writeln!(
        out,
        "CDF of time at each fraction of peak ({} s buckets):",
        report.bucket_s
    )
    .unwrap();
    writeln!(
        out,
        "{:>9} {:>12} {:>12}",
        "≤ peak×", "time(bytes)", "time(reqs)"
    )
    .unwrap();
    for p in report.cdf.iter().step_by(2) {
        writeln!(
            out,
            "{:>9.2} {:>12.3} {:>12.3}",
            p.fraction_of_peak, p.time_fraction_bytes, p.time_fraction_requests
        )
        .unwrap();
    }
    out
}
