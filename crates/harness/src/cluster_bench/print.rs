//! The bench's tables, beside the paper's figures.

use super::*;

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

pub(super) fn print_result(r: &BenchResult) {
    println!(
        "cluster bench: {} chunk servers and {} loggers on emulated {} disks",
        r.servers, r.loggers, r.emulate
    );
    if r.seeds.is_empty() {
        println!("no day run (--no-day)");
    } else {
        println!(
            "a day of {} s hours, baseline (gear 3 all day) and gear shifting; gears and energy by {}",
            r.hour_seconds,
            r.method.label()
        );
    }
    for s in &r.seeds {
        print_seed(r, s);
    }
    if r.seeds.len() > 1 {
        let spread = |f: &dyn Fn(&SeedResult) -> f64| {
            let v: Vec<f64> = r.seeds.iter().map(f).collect();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            format!("mean {mean:.1}, min {min:.1}, max {max:.1}")
        };
        println!();
        println!(
            "over {} seeds: energy saved (chunk servers) {} %; with loggers {} %; largest p99 ratio outside shift windows and reclaims {}",
            r.seeds.len(),
            spread(&|s| 100.0 * s.saving_servers),
            spread(&|s| 100.0 * s.saving_with_loggers),
            spread(&|s| s.p99_steady.max.unwrap_or(0.0))
        );
    }
    if !r.rebuild.is_empty() {
        println!();
        println!(
            "Figure 12 (one server failed for good, rebuilt onto its gear group; paper: rate linear in the servers writing):"
        );
        println!(
            "{:>8} {:>8} {:>7} {:>10} {:>9} {:>8}",
            "servers", "writers", "groups", "MB", "seconds", "MB/s"
        );
        for b in &r.rebuild {
            println!(
                "{:>8} {:>8} {:>7} {:>10.1} {:>9.2} {:>8.1}",
                b.servers,
                b.writers,
                b.groups,
                b.bytes as f64 / 1e6,
                b.seconds,
                b.mb_per_s
            );
        }
    }
    if !r.throughput.is_empty() {
        println!();
        println!(
            "Table 5 (top gear, {} chunk servers): {:<17} {:>10} {:>10} {:>8} {:>14}",
            r.servers, "workload", "measured", "ideal", "errors", "paper (ideal)"
        );
        for t in &r.throughput {
            println!(
                "{:<36}{:<17} {:>10.1} {:>10.1} {:>8} {:>14}",
                "",
                format!("{} {}", t.workload, t.unit),
                t.measured,
                t.ideal,
                t.errors,
                format!("{} ({})", t.paper, t.paper_ideal)
            );
        }
        let plain: Vec<_> = r
            .throughput
            .iter()
            .filter_map(|t| t.plain.as_ref().map(|p| (t, p)))
            .collect();
        if !plain.is_empty() {
            println!();
            println!(
                "Replicated (r = 3 on {} chunk servers) against a plain volume on one emulated disk, same run:",
                r.servers
            );
            println!(
                "  {:<22} {:>10} {:>10} {:>11} {:>11} {:>12} {:>26}",
                "workload",
                "replicated",
                "plain",
                "plain depth",
                "plain ideal",
                "plain errors",
                "replicated ÷ (plain × N/r)"
            );
            for (t, p) in plain {
                println!(
                    "  {:<22} {:>10.1} {:>10.1} {:>11} {:>11.1} {:>12} {:>26.2}",
                    format!("{} {}", t.workload, t.unit),
                    t.measured,
                    p.measured,
                    p.depth,
                    p.ideal,
                    p.errors,
                    p.cluster_over_plain_disks
                );
            }
        }
    }
}

/// One seed's day: its gears, each hour's figures, its energy and its requests.
fn print_seed(r: &BenchResult, s: &SeedResult) {
    println!();
    println!(
        "seed {}: {:.0} requests/s at the daytime peak; gears by hour {}; the paper's provisioning rule gives {} chunk servers for this day (the cluster has {})",
        s.seed,
        s.rate_at_peak_per_s,
        gears_text(&s.plan),
        s.provisioned_servers,
        r.servers
    );
    println!(
        "{:>4} {:>5} {:>8} {:>9} {:>11} {:>11} {:>10} {:>10}",
        "hour", "gear", "window", "requests", "base mean", "gears mean", "base p99", "gears p99"
    );
    for (b, g) in s.baseline.hours.iter().zip(&s.gears.hours) {
        println!(
            "{:>4} {:>5} {:>8} {:>9} {:>11} {:>11} {:>10} {:>10}",
            g.hour,
            g.gear,
            match (g.shift_window, g.reclaiming) {
                (true, _) => "shift",
                (false, true) => "reclaim",
                _ => "",
            },
            g.completions,
            opt(b.mean_ms),
            opt(g.mean_ms),
            opt(b.p99_ms),
            opt(g.p99_ms)
        );
    }
    for p in [Some(&s.baseline), s.baseline_all.as_ref(), Some(&s.gears)]
        .into_iter()
        .flatten()
    {
        println!(
            "{:<9} {} requests, {} errors; mean {:.1} ms reads / {:.1} ms writes, p99 {:.1} / {:.1} ms; energy {:.1} kJ; standby {:.1} % of server time",
            p.name,
            p.replay.records,
            p.replay.errors,
            p.replay.reads.mean_ms.unwrap_or(0.0),
            p.replay.writes.mean_ms.unwrap_or(0.0),
            p.replay.reads.p99_ms.unwrap_or(0.0),
            p.replay.writes.p99_ms.unwrap_or(0.0),
            p.energy_j / 1e3,
            100.0 * p.standby_fraction
        );
    }
    let loggers = match r.method {
        Method::Paper => format!(
            "{} loggers measured at {:.1} kJ, against the baseline of {} chunk servers run",
            r.loggers,
            s.logger_energy_j / 1e3,
            r.servers + r.loggers
        ),
        Method::MeanLoad => format!(
            "{} loggers at idle power, {:.1} kJ, against the baseline scaled to {} servers",
            r.loggers,
            s.logger_energy_j / 1e3,
            r.servers + r.loggers
        ),
    };
    println!(
        "energy saved: {:.1} % (chunk servers alone), {:.1} % ({loggers}); paper: {PAPER_SAVING}",
        100.0 * s.saving_servers,
        100.0 * s.saving_with_loggers
    );
    println!(
        "p99 against the baseline's same hour — outside shift windows and reclaims: {}; reclaiming after an up-shift: {}; shift windows: {}",
        s.p99_steady.text(),
        s.p99_reclaim.text(),
        s.p99_shift.text()
    );
    let g = &s.gears;
    println!(
        "migrations: {} in the day, {} client requests refused and retried; paper (Table 3, one down-shift): {PAPER_TABLE3}",
        g.migrations, g.refused
    );
    for sh in &g.shifts {
        // The gear unchanged: the MDS's day turned, and with it the rotation of gear groups.
        let what = if sh["from"] == sh["to"] {
            format!("rotation of the gear groups in gear {}", sh["to"])
        } else {
            format!("shift {} → {}", sh["from"], sh["to"])
        };
        println!(
            "  {what} at {:.1} s: {} migrations, settled in {}",
            sh["at_s"].as_f64().unwrap_or(0.0),
            sh["migrations"],
            sh["settled_ms"]
                .as_f64()
                .map_or("(not settled)".into(), |ms| format!("{ms:.0} ms"))
        );
    }
    let day_s = 24.0 * r.hour_seconds as f64;
    let in_day: Vec<&Reclaim> = g.reclaims.iter().filter(|rc| rc.at_s < day_s).collect();
    let top_s = s.plan.iter().filter(|h| h.gear == 3).count() as f64 * r.hour_seconds as f64;
    let logged_at_up: u64 = in_day.iter().map(|rc| rc.logged_bytes).sum();
    let (reclaimed, seconds) = in_day.iter().fold((0u64, 0.0), |(b, t), rc| {
        (b + rc.reclaimed_bytes, t + rc.seconds)
    });
    println!(
        "Table 2 analogue: {:.1} MB on the loggers at the up-shifts to gear 3, {:.0} s in gear 3: required reclaim rate {}; achieved {} ({:.1} MB in {:.1} s of reclaim)",
        logged_at_up as f64 / 1e6,
        top_s,
        if top_s > 0.0 { format!("{:.1} MB/s", logged_at_up as f64 / 1e6 / top_s) } else { "-".into() },
        if seconds > 0.0 { format!("{:.1} MB/s", reclaimed as f64 / 1e6 / seconds) } else { "-".into() },
        reclaimed as f64 / 1e6,
        seconds
    );
    println!(
        "logging: {:.1} MB logged, {:.1} MB reclaimed in the day; gear 3 set by hand after it, the loggers were empty {}; paper (Table 2): {PAPER_TABLE2}",
        g.logged_bytes as f64 / 1e6,
        g.reclaimed_bytes as f64 / 1e6,
        g.loggers_empty_after_s
            .map_or("NOT within 120 s".into(), |t| format!(
                "{t:.1} s after the day's end"
            ))
    );
    for rc in &g.reclaims {
        println!(
            "  up-shift at {:.1} s: {:.1} MB on the loggers; {:.1} MB reclaimed in {:.1} s ({}), {}",
            rc.at_s,
            rc.logged_bytes as f64 / 1e6,
            rc.reclaimed_bytes as f64 / 1e6,
            rc.seconds,
            rc.mb_per_s.map_or("-".into(), |r| format!("{r:.1} MB/s")),
            if rc.left_bytes == 0 {
                "the loggers empty".to_string()
            } else {
                format!(
                    "{:.1} MB left when the gear went down",
                    rc.left_bytes as f64 / 1e6
                )
            }
        );
    }
}
