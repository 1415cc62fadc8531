//! Text of `sim replay`, `replay` (against a live export) and `sim calibrate`.

use cordillera_models::calibration::Row;
use cordillera_models::histogram::LatencySummary;
use cordillera_sim::replay::ReplayReport;

/// The response-time table of `sim replay` and `replay`: `rows`, then the trace's recorded
/// reads and writes when asked for (`recorded`), then `after`.
pub fn latencies_text(
    rows: &[(&str, &LatencySummary)],
    recorded: Option<[Option<&LatencySummary>; 2]>,
    after: &[(&str, &LatencySummary)],
) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.3}"));
    let mut out = format!(
        "{:<22} {:>9} {:>10} {:>10} {:>10} {:>10}\n",
        "response time (ms)", "count", "mean", "p50", "p99", "max"
    );
    let [recorded_reads, recorded_writes] = recorded.unwrap_or([None, None]);
    let recorded_rows = [
        recorded_reads.map(|s| ("recorded reads", s)),
        recorded_writes.map(|s| ("recorded writes", s)),
    ];
    let all = rows
        .iter()
        .copied()
        .chain(recorded_rows.into_iter().flatten())
        .chain(after.iter().copied());
    for (name, s) in all {
        out.push_str(&format!(
            "{:<22} {:>9} {:>10} {:>10} {:>10} {:>10}\n",
            name,
            s.count,
            opt(s.mean_ms),
            opt(s.p50_ms),
            opt(s.p99_ms),
            opt(s.max_ms)
        ));
    }
    if recorded.is_some() && recorded_reads.is_none() && recorded_writes.is_none() {
        out.push_str("  (the trace records no response times)\n");
    }
    out
}

/// `sim replay`'s report of `trace` on `device` (described), with the trace's recorded
/// response times beside when `compare_recorded`, and per interval when `intervals`.
pub fn replay_text(
    r: &ReplayReport,
    trace: &str,
    device: &str,
    compare_recorded: bool,
    intervals: bool,
) -> String {
    let mut out = format!(
        "Replayed {} records of {trace} on {device} (open loop, {:.1} s simulated)\n",
        r.records, r.duration_s
    );
    if r.skipped_empty + r.wrapped + r.late > 0 {
        out.push_str(&format!(
            "  skipped {} zero-length or oversized, wrapped {} beyond the device, {} out of order\n",
            r.skipped_empty, r.wrapped, r.late
        ));
    }
    out.push_str(&latencies_text(
        &[
            ("simulated reads", &r.reads),
            ("simulated writes", &r.writes),
        ],
        compare_recorded.then_some([r.recorded_reads.as_ref(), r.recorded_writes.as_ref()]),
        &[],
    ));
    out.push_str(&format!(
        "utilization {:.1} %, queue length mean {:.2}, max {}\n",
        100.0 * r.utilization,
        r.mean_queue,
        r.max_queue
    ));
    if intervals {
        out.push_str(&format!(
            "{:>10} {:>12} {:>10} {:>8} {:>8}\n",
            "start_s", "completions", "mean_q", "max_q", "util%"
        ));
        for i in &r.intervals {
            out.push_str(&format!(
                "{:>10.1} {:>12} {:>10.2} {:>8} {:>8.1}\n",
                i.start_s,
                i.completions,
                i.mean_queue,
                i.max_queue,
                100.0 * i.utilization
            ));
        }
    }
    out
}

/// `sim calibrate`'s table: each preset's published figure beside the model's.
pub fn calibration_text(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<18} {:<48} {:>10} {:>10} {:>8}\n",
        "device", "metric", "published", "measured", "error"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<18} {:<48} {:>10} {:>10.2} {:>+7.1}%\n",
            r.device, r.metric, r.published, r.measured, r.error_pct
        ));
    }
    out
}
