//! `cluster status` as text: the MDS's gear, schedule and counts, then every chunk server's
//! and logger's figures.

use std::path::Path;

use super::http_get;

/// The active MDS's `/status` for `cluster status`: at `mds_http` if given, else found from the
/// spec in `dir` (`cluster up`'s: every MDS's HTTP endpoint is 100 above its address; with
/// several, the one that answers as active). Its HTTP address, the body, and how many
/// loggers the spec names (when read).
pub fn active_mds_status(
    dir: &Path,
    mds_http: Option<&str>,
) -> Result<(String, String, Option<usize>), String> {
    if let Some(h) = mds_http {
        let body = http_get(h, "/status").map_err(|e| format!("the MDS: {e}"))?;
        return Ok((h.to_string(), body, None));
    }
    let path = dir.join("spec.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (give --dir of `cluster up`, or --mds-http)",
            path.display()
        )
    })?;
    let spec: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let loggers = spec["loggers"].as_array().map(Vec::len);
    let mut errors = Vec::new();
    for addr in spec["mds"].as_str().unwrap_or_default().split(',') {
        let Some(port) = addr.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()) else {
            return Err(format!("the spec's MDS address {addr:?} has no port"));
        };
        let http = format!("127.0.0.1:{}", port + 100);
        match http_get(&http, "/status") {
            Ok(body) if !body.contains("\"role\":\"standby\"") => return Ok((http, body, loggers)),
            Ok(_) => errors.push(format!("{http}: standing by")),
            Err(e) => errors.push(e),
        }
    }
    Err(format!("no active MDS: {}", errors.join("; ")))
}

/// The gear scheduler's part of the MDS's status: the gears of today and tomorrow with the
/// loads predicted, the hour being measured and the last day measured (peak L per hour).
fn schedule_text(s: &serde_json::Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if s.is_null() {
        return out;
    }
    let gears = |key: &str| -> String {
        s[key]
            .as_array()
            .map(|a| a.iter().map(|g| g.to_string()).collect::<Vec<_>>().join(""))
            .unwrap_or_default()
    };
    let loads = |key: &str| -> String {
        s[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|l| l.as_f64().map_or("-".into(), |l| format!("{l:.1}")))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    let _ = writeln!(
        out,
        "schedule: {} (hours of {} s), {} hours measured, {} late reports",
        s["schedule"].as_str().unwrap_or("?"),
        s["hour_seconds"],
        s["hours_measured"],
        s["late_reports"]
    );
    let _ = writeln!(
        out,
        "  learned gears today    (hours 0–23): {}",
        gears("today")
    );
    let _ = writeln!(
        out,
        "  learned gears tomorrow (hours 0–23): {}",
        gears("tomorrow")
    );
    let _ = writeln!(out, "  predicted L today: {}", loads("today_predicted"));
    if let Some(m) = s["measuring"].as_object() {
        let _ = writeln!(
            out,
            "  measuring hour {}: peak L {:.2}, mean {:.2}, {} s seen",
            m["hour"],
            m["peak"].as_f64().unwrap_or(0.0),
            m["mean"].as_f64().unwrap_or(0.0),
            m["covered_s"]
        );
    }
    let measured = s["measured"].as_array().cloned().unwrap_or_default();
    let last: Vec<String> = measured
        .iter()
        .rev()
        .take(24)
        .rev()
        .map(|h| format!("{:.1}", h["peak"].as_f64().unwrap_or(0.0)))
        .collect();
    if !last.is_empty() {
        let _ = writeln!(
            out,
            "  peak L, last {} hours: {}",
            last.len(),
            last.join(" ")
        );
    }
    out
}

/// `cluster status` as a table: the MDS's gear and counts (from its `/status`, `mds_status`,
/// read at `mds_http`), then each chunk server's figures and each logger's, asked at the ports
/// `cluster up` gives them (a server in standby does not answer: the MDS's figures are shown).
/// `loggers`: how many the spec names (`None`: probed until one does not answer).
pub fn status_text(
    mds_http: &str,
    mds_status: &str,
    loggers: Option<usize>,
) -> Result<String, String> {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mds: serde_json::Value =
        serde_json::from_str(mds_status).map_err(|e| format!("the MDS's status: {e}"))?;
    let port: u16 = mds_http
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("{mds_http} has no port"))?;
    let _ = writeln!(
        out,
        "gear {} ({}; the plan says {} for hour {}), {} groups, {} without a primary, {} migrations, {} standbys, {} wakes",
        mds["gear"],
        if mds["gear_by_hand"].as_bool() == Some(true) { "set by hand" } else { "the plan" },
        mds["planned_gear"],
        mds["hour"],
        mds["groups"],
        mds["groups_without_primary"],
        mds["stats"]["migrations"],
        mds["stats"]["standbys"],
        mds["stats"]["wakes"],
    );
    let _ = writeln!(
        out,
        "{:<7} {:<6} {:<22} {:<10} {:>9} {:>13} {:>13} {:>12} {:>10}",
        "server",
        "rack",
        "address",
        "state",
        "primaries",
        "logged bytes",
        "at risk",
        "standby s",
        "energy kJ"
    );
    for s in mds["servers"].as_array().cloned().unwrap_or_default() {
        let id = s["id"].as_u64().unwrap_or(0) as u16;
        // The server's own figures (a server in standby does not answer: the MDS's are shown).
        let own = http_get(&format!("127.0.0.1:{}", port + 1 + id), "/status")
            .ok()
            .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok());
        let (logged, at_risk, standby, energy) = match &own {
            Some(o) => (
                o["logged_bytes"].to_string(),
                o["at_risk_bytes"].to_string(),
                format!("{:.1}", o["power"]["standby_s"].as_f64().unwrap_or(0.0)),
                format!(
                    "{:.1}",
                    o["power"]["energy_j"].as_f64().unwrap_or(0.0) / 1000.0
                ),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "{:<7} {:<6} {:<22} {:<10} {:>9} {:>13} {:>13} {:>12} {:>10}",
            id,
            s["rack"].as_str().unwrap_or("?"),
            s["addr"].as_str().unwrap_or("?"),
            s["state"].as_str().unwrap_or("?"),
            s["primaries"],
            logged,
            at_risk,
            standby,
            energy
        );
    }
    out.push_str(&schedule_text(&mds["schedule"]));
    // Loggers (their endpoints follow the servers' in the `cluster up` port plan).
    let servers = mds["servers"].as_array().map_or(0, |s| s.len()) as u16;
    let _ = writeln!(
        out,
        "{:<7} {:<6} {:>12} {:>14} {:>12}",
        "logger", "rack", "queue", "used MB", "requests/s"
    );
    for i in 0u16.. {
        if loggers.is_some_and(|n| i as usize >= n) {
            break;
        }
        let l = http_get(&format!("127.0.0.1:{}", port + 1 + servers + i), "/status")
            .ok()
            .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok())
            .filter(|l| l.get("queue_length").is_some());
        match l {
            Some(l) => {
                let _ = writeln!(
                    out,
                    "{:<7} {:<6} {:>12} {:>14.1} {:>12}",
                    i,
                    l["rack"].as_str().unwrap_or("?"),
                    l["queue_length"],
                    l["used_bytes"].as_f64().unwrap_or(0.0) / 1e6,
                    l["requests_per_s"]
                );
            }
            // Probing without a spec: the first that does not answer ends the list.
            None if loggers.is_none() => break,
            None => {
                let _ = writeln!(out, "{i:<7} {:<6} {:>12}", "?", "unreachable");
            }
        }
    }
    Ok(out)
}
