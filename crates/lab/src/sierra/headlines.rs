//! A `lab sierra` report reduced to its headline figures, for the spread over seeds
//! (`--seeds K`): the gears' accuracy and the power saved (§4.1, §4.4), Figure 11's response
//! times, Tables 2 and 3, the measured power run, Table 5 and Figure 12 — each beside the
//! paper's value as the paper states it.

use crate::spread::Figure;

use super::analysis::ScheduleReport;
use super::testbed::TestbedReport;
use super::Report;

pub fn headlines(r: &Report) -> Vec<Figure> {
    let mut out = Vec::new();
    for t in &r.load_traces {
        if let Some(p) = t.prediction.iter().find(|p| p.training_days == 6) {
            out.push(Figure::new(
                format!("load/{}/gears_correct_6_days", t.name),
                format!("{}: gears correct, 6 days of training", t.name),
                "%",
                100.0 * p.gears_correct_fraction(),
                "Hotmail 100, Messenger 90, Cambridge 75",
            ));
        }
        for (g_min, on) in &t.oracle_fraction_on {
            out.push(Figure::new(
                format!("load/{}/oracle_saved/{g_min}", t.name),
                format!("{}: servers off, oracle gears, g_min {g_min}", t.name),
                "%",
                100.0 * (1.0 - on),
                "up to 60 (Cambridge)",
            ));
        }
    }
    for w in &r.predictors {
        for s in w.scores.iter().filter(|s| s.predicted_hours > 0) {
            let key = format!("predict/{}/{:?}", w.workload, s.predictor);
            let name = format!("{}: {}", w.workload, s.predictor.name());
            out.push(Figure::new(
                format!("{key}/rms"),
                format!("{name}, RMS error / mean"),
                "",
                s.rms_error_normalized,
                "Figure 8: Hotmail, Messenger low after a day; Cambridge high, falling",
            ));
            out.push(Figure::new(
                format!("{key}/gears_right"),
                format!("{name}, gears right"),
                "%",
                100.0 * s.gears_correct as f64 / s.test_hours.max(1) as f64,
                "",
            ));
            out.push(Figure::new(
                format!("{key}/under_geared"),
                format!("{name}, hours under-geared"),
                "h",
                s.hours_under_geared as f64,
                "",
            ));
        }
    }
    for s in &r.schedules {
        schedule(&mut out, s);
    }
    if let Some(m) = &r.mds_state {
        out.push(Figure::new(
            "mds/bytes_per_chunk",
            "MDS state per chunk",
            "B",
            m.size.bytes_per_chunk,
            "23",
        ));
    }
    for t in &r.testbed {
        testbed(&mut out, t);
    }
    if let Some(m) = &r.micro {
        for row in &m.table5 {
            out.push(Figure::new(
                format!("table5/{}", row.workload),
                format!("Table 5: {}", row.workload),
                row.unit,
                row.aggregate,
                format!("{}", row.paper),
            ));
        }
        for p in &m.figure12 {
            out.push(Figure::new(
                format!("figure12/{}MB/{}", p.chunk_bytes >> 20, p.write_servers),
                format!(
                    "Figure 12: {} MB chunks rebuilt onto {}",
                    p.chunk_bytes >> 20,
                    p.write_servers
                ),
                "MB/s",
                p.mb_per_s,
                "linear in servers; 64 MB faster",
            ));
        }
    }
    out
}

fn schedule(out: &mut Vec<Figure>, s: &ScheduleReport) {
    out.push(Figure::new(
        format!("schedule/{}/chunk_servers", s.name),
        format!("{}: chunk servers N", s.name),
        "",
        s.chunk_servers as f64,
        "15",
    ));
    for p in &s.power {
        let savings = [
            ("saved", "energy saved", p.with_loggers_over_baseline),
            (
                "saved_chunk_servers",
                "energy saved by the chunk servers alone",
                p.chunk_servers_over_baseline,
            ),
        ];
        for (key, what, ratio) in savings {
            let paper = if key == "saved" && p.g_min == 1 {
                "at least 23"
            } else {
                ""
            };
            out.push(Figure::new(
                format!("schedule/{}/{key}/{}", s.name, p.g_min),
                format!("{}: {what}, schedule estimate, g_min {}", s.name, p.g_min),
                "%",
                100.0 * (1.0 - ratio),
                paper,
            ));
        }
        out.push(Figure::new(
            format!("schedule/{}/top_gear_hours/{}", s.name, p.g_min),
            format!("{}: hours in the top gear, g_min {}", s.name, p.g_min),
            "h",
            p.hours_in_top_gear as f64,
            "14 of 48",
        ));
    }
}

fn testbed(out: &mut Vec<Figure>, t: &TestbedReport) {
    let mut failed = 0;
    for e in &t.experiments {
        for run in &e.runs {
            failed += run.failed;
            if e.name == "power" {
                continue;
            }
            let key = format!("testbed/{}/{}", e.name, run.config);
            if let Some(v) = run.latency.mean_ms {
                out.push(Figure::new(
                    format!("{key}/mean_ms"),
                    format!("Figure 11: {} {} mean", e.name, run.config),
                    "ms",
                    v,
                    "",
                ));
            }
            if let Some(v) = run.latency.p99_ms {
                out.push(Figure::new(
                    format!("{key}/p99_ms"),
                    format!("Figure 11: {} {} p99", e.name, run.config),
                    "ms",
                    v,
                    "",
                ));
            }
        }
    }
    let n = &t.need;
    out.push(Figure::new(
        "table2/logged_gb",
        "Table 2: data logged below the top gear",
        "GB",
        n.logged_bytes_total as f64 / 1e9,
        "166",
    ));
    out.push(Figure::new(
        "table2/required_mb_s",
        "Table 2: required reclaim rate",
        "MB/s",
        n.required_mb_per_s,
        "3.4",
    ));
    let sierra = |name: &str| {
        t.experiments
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.runs.iter().find(|r| r.config == "sierra"))
    };
    if let Some(u) = sierra("up-shift") {
        out.push(Figure::new(
            "table2/reclaimed_gb",
            "Table 2: reclaimed in the up-shift window",
            "GB",
            u.reclaimed_bytes as f64 / 1e9,
            "22",
        ));
        if let Some(rate) = u.reclaim_mb_per_s {
            out.push(Figure::new(
                "table2/achieved_mb_s",
                "Table 2: achieved reclaim rate",
                "MB/s",
                rate,
                "6.3",
            ));
        }
        out.push(Figure::new(
            "table2/queue_reclaim",
            "Table 2: logger disk queue, reclaim",
            "",
            u.logger_queue_mean,
            "2.3",
        ));
    }
    if let Some(s) = sierra("steady") {
        out.push(Figure::new(
            "table2/queue_steady",
            "Table 2: logger disk queue, steady",
            "",
            s.logger_queue_mean,
            "0.09",
        ));
    }
    if let Some(d) = sierra("down-shift") {
        out.push(Figure::new(
            "table3/migrations",
            "Table 3: primary migrations",
            "",
            d.migrations as f64,
            "102",
        ));
        out.push(Figure::new(
            "table3/migration_ms_total",
            "Table 3: groups without a primary, in all",
            "ms",
            d.migration_ns_total as f64 / 1e6,
            "28",
        ));
        out.push(Figure::new(
            "table3/retries_per_1000",
            "Table 3: client retries per 1,000 requests",
            "",
            1000.0 * d.client_retries as f64 / d.requests.max(1) as f64,
            "0.30 (77 of 254,536)",
        ));
    }
    if let Some(p) = t.experiments.iter().find(|e| e.name == "power") {
        let run = |c: &str| p.runs.iter().find(|r| r.config == c);
        if let (Some(s), Some(b)) = (run("sierra"), run("baseline")) {
            out.push(Figure::new(
                "power/saved",
                "Figure 9 (right), measured: energy saved",
                "%",
                100.0 * (1.0 - s.energy_j / b.energy_j.max(1e-9)),
                "at least 23",
            ));
            if let Some(n) = run("baseline-n") {
                out.push(Figure::new(
                    "power/saved_chunk_servers",
                    "Figure 9 (right), measured: energy saved, chunk servers alone",
                    "%",
                    100.0 * (1.0 - s.chunk_server_energy_j / n.chunk_server_energy_j.max(1e-9)),
                    "close to the analysis",
                ));
            }
            out.push(Figure::new(
                "power/standby",
                "Measured: chunk servers in standby",
                "%",
                100.0 * s.asleep_fraction,
                "",
            ));
        }
    }
    out.push(Figure::new(
        "testbed/failed",
        "Testbed: requests failed",
        "",
        failed as f64,
        "0",
    ));
}
