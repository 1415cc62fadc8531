//! `warmup schemes` as text: one run's hit rates per interval, T_converge and load
//! reductions; or the spread over seeds.

use std::fmt::Write as _;

use crate::bonfire::schemes_run::{OverSeeds, SchemesConfig, SchemesReport};

/// The report as text.
pub fn schemes_text(a: &SchemesConfig, report: &SchemesReport) -> String {
    let mut out = String::new();
    let interval = report.interval;
    let cold_converge = report.schemes[1].converge;
    let warmed_converge = report.schemes[2].converge;
    let unit_name = a.axis.unit();
    writeln!(out,
        "{} requests; working set {} blocks; {} cache of {} blocks; {} warmed {} blocks ({} B regions) from the history before T = {:.0} {unit_name}; pre-load {:.1} s at {} MB/s",
        report.requests,
        report.working_set_blocks,
        report.policy,
        report.cache_blocks,
        report.algorithm,
        report.warmup_blocks,
        report.region_bytes,
        report.start,
        report.preload_s,
        a.preload_mb_per_s
    ).unwrap();
    writeln!(
        out,
        "{:>12} {:>12} {:>12} {:>12}",
        format!("from T, {unit_name}"),
        "always-warm",
        "cold",
        "warmed"
    )
    .unwrap();
    let pct = |h: Option<f64>| h.map_or("-".to_owned(), |h| format!("{:.1} %", h * 100.0));
    for (i, row) in report.intervals.iter().enumerate() {
        writeln!(
            out,
            "{:>12.0} {:>12} {:>12} {:>12}",
            i as f64 * interval,
            pct(row[0]),
            pct(row[1]),
            pct(row[2])
        )
        .unwrap();
    }
    let when = |t: Option<f64>| {
        t.map_or("never (within the trace)".to_owned(), |t| {
            format!("{t:.0} {unit_name}")
        })
    };
    writeln!(
        out,
        "T_converge (Th_V {}, Th_N {}): cold {}, warmed {}; improvement {}",
        a.th_v,
        a.th_n,
        when(cold_converge),
        when(warmed_converge),
        match (
            cold_converge,
            warmed_converge,
            report.converge_improvement_percent
        ) {
            (_, _, Some(p)) => format!("{p:.0} %"),
            (None, _, None) | (_, None, None) => "- (a scheme never converged)".to_owned(),
            _ => "- (cold converges at once)".to_owned(),
        }
    )
    .unwrap();
    if let (Some(name), Some(m), Some(s)) = (
        &report.preload_device,
        report.preload_metadata_only_s,
        report.preload_snapshot_s,
    ) {
        writeln!(out, "pre-load on {name}: in place (metadata-only) {m:.2} s, from a snapshot (metadata+data) {s:.2} s").unwrap();
    }
    writeln!(
        out,
        "server load reduction over {}: always-warm {}, cold {}, warmed {}",
        if report.schemes[1].converge_intervals.is_some() {
            "cold's T_converge"
        } else {
            "the whole run (cold never converged)"
        },
        pct(report.schemes[0].server_load_reduction),
        pct(report.schemes[1].server_load_reduction),
        pct(report.schemes[2].server_load_reduction)
    )
    .unwrap();
    out
}

/// The spread over seeds.
pub fn over_seeds_text(o: &OverSeeds) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "warmup schemes over seeds {}–{} ({}): mean, min – max, standard deviation",
        o.seeds[0],
        o.seeds[o.seeds.len() - 1],
        if o.workload_seeded {
            "each its own generated workload and Random-K"
        } else {
            "the same trace; only Random-K's choices change"
        }
    )
    .unwrap();
    for r in &o.spread {
        writeln!(
            out,
            "  {:<48} {:>10.2} {}  ({:.2} – {:.2}, sd {:.2}; {} seeds)",
            r.label,
            r.mean,
            r.unit,
            r.min,
            r.max,
            r.std_dev,
            r.values.len()
        )
        .unwrap();
    }
    if !o.never_converged.is_empty() {
        writeln!(
            out,
            "  a scheme never converged with seed(s) {:?}: left out of T_converge's spread",
            o.never_converged
        )
        .unwrap();
    }
    out
}
