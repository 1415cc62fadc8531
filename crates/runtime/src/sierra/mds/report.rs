//! The MDS's `/status` (JSON) and `/metrics` (Prometheus): its gear and schedule, servers,
//! groups, counters and the state's size.

use std::collections::BTreeMap;

use serde::Serialize;

use cordillera_gears::load::HourLoad;
use cordillera_gears::mds::{MdsStats, ServerState, StateSize};
use cordillera_gears::model::{GroupId, ServerId};

use super::super::spec::Schedule;
use super::{Daemon, ShiftReport, HOURS_SHOWN};
use crate::http;

impl Daemon<'_> {
    fn report(&self) -> Report {
        let n = self.spec.servers.len();
        let mut primaries = vec![0u64; n];
        let mut without_primary = 0;
        for g in 0..self.mds.group_count() {
            match self.mds.view(GroupId(g as u32)).primary {
                Some(p) => primaries[p as usize] += 1,
                None => without_primary += 1,
            }
        }
        let g = self.gear();
        Report {
            cluster: self.spec.cluster,
            gear: g.gear,
            gear_by_hand: g.by_hand,
            planned_gear: self.planned_at(self.clock_ms()).1,
            schedule: self.schedule_report(),
            shifts: self.shifts.iter().map(|s| s.report.clone()).collect(),
            hour: g.hour,
            day: g.day,
            gear_changes: self.gear_changes,
            servers: (0..n)
                .map(|s| ServerReport {
                    id: s as ServerId,
                    rack: self.spec.rack_of(s as ServerId).to_string(),
                    addr: self.spec.servers[s].clone(),
                    state: self.mds.server_state(s as ServerId),
                    primaries: primaries[s],
                })
                .collect(),
            groups: self.mds.group_count(),
            groups_without_primary: without_primary,
            stats: self.mds.stats(),
            state_size: self.mds.state_size(),
            commits: self.store.commits(),
            frames_sent: self.net.stats.frames_sent,
            frames_dropped: self.net.stats.frames_dropped,
            frames_charged_bytes: self.net.charged_bytes(),
            uptime_s: self.start.elapsed().as_secs_f64(),
        }
    }

    fn schedule_report(&self) -> ScheduleReport {
        let hour_seconds = self.spec.hour_seconds;
        let hour = (self.clock_ms() / 1000 / hour_seconds) as i64;
        let day = hour.div_euclid(24);
        let mut measured: Vec<HourLoad> = self.scheduler.hours().copied().collect();
        let keep_from = measured.len().saturating_sub(HOURS_SHOWN);
        let predicted = |day: i64| -> Vec<Option<f64>> {
            let p = self.scheduler.predictor(day);
            (0..24).map(|h| p.predict(h)).collect()
        };
        ScheduleReport {
            schedule: self.spec.schedule,
            hour_seconds,
            hours_measured: measured.len(),
            measured: measured.split_off(keep_from),
            measuring: self.scheduler.current(),
            late_reports: self.scheduler.late(),
            refused_reports: self.scheduler.refused(),
            today: self.scheduler.plan(day).gears.to_vec(),
            today_predicted: predicted(day),
            tomorrow: self.scheduler.plan(day + 1).gears.to_vec(),
            tomorrow_predicted: predicted(day + 1),
        }
    }

    pub(super) fn status_json(&self) -> String {
        serde_json::to_string_pretty(&self.report()).expect("a report serializes")
    }

    pub(super) fn metrics(&self) -> String {
        let r = self.report();
        let mut out = String::new();
        let mut line =
            |name: &str, help: &str, value: String| http::gauge(&mut out, name, help, value);
        line("sierra_mds_gear", "Current gear.", r.gear.to_string());
        line(
            "sierra_mds_gear_planned",
            "The plan's gear for this hour.",
            r.planned_gear.to_string(),
        );
        line(
            "sierra_mds_groups_without_primary",
            "Chunk groups with no primary.",
            r.groups_without_primary.to_string(),
        );
        line(
            "sierra_mds_migrations_total",
            "Primary migrations.",
            r.stats.migrations.to_string(),
        );
        line(
            "sierra_mds_reassignments_total",
            "Primaries reassigned after a failure.",
            r.stats.reassignments.to_string(),
        );
        line(
            "sierra_mds_standbys_total",
            "Servers that entered standby.",
            r.stats.standbys.to_string(),
        );
        line(
            "sierra_mds_wakes_total",
            "Servers woken.",
            r.stats.wakes.to_string(),
        );
        line(
            "sierra_mds_state_bytes_per_chunk",
            "MDS state per chunk.",
            format!("{:.1}", r.state_size.bytes_per_chunk),
        );
        let mut by_state: BTreeMap<String, u64> = BTreeMap::new();
        for s in &r.servers {
            *by_state
                .entry(format!("{:?}", s.state).to_lowercase())
                .or_default() += 1;
        }
        out.push_str(
            "# HELP sierra_mds_servers Chunk servers by state.\n# TYPE sierra_mds_servers gauge\n",
        );
        for (state, n) in by_state {
            out.push_str(&format!("sierra_mds_servers{{state=\"{state}\"}} {n}\n"));
        }
        out
    }
}

#[derive(Serialize)]
struct ServerReport {
    id: ServerId,
    rack: String,
    addr: String,
    state: ServerState,
    primaries: u64,
}

/// The gear scheduler: what it measured and what it plans (whether or not the spec follows it).
#[derive(Serialize)]
struct ScheduleReport {
    schedule: Schedule,
    hour_seconds: u64,
    hours_measured: usize,
    /// The latest hours measured (up to a week), oldest first.
    measured: Vec<HourLoad>,
    /// The hour being measured, so far.
    measuring: Option<HourLoad>,
    late_reports: u64,
    /// Reports for seconds an hour or more from the MDS's clock (a server's clock gone wrong).
    refused_reports: u64,
    /// The learned plan's gears for each hour of today and tomorrow, and the loads predicted
    /// (in chunk servers; none for an hour no earlier day measured).
    today: Vec<usize>,
    today_predicted: Vec<Option<f64>>,
    tomorrow: Vec<usize>,
    tomorrow_predicted: Vec<Option<f64>>,
}

#[derive(Serialize)]
struct Report {
    cluster: u64,
    gear: usize,
    gear_by_hand: bool,
    planned_gear: usize,
    schedule: ScheduleReport,
    hour: u64,
    day: i64,
    gear_changes: u64,
    /// The latest gear shifts (up to 64), oldest first.
    shifts: Vec<ShiftReport>,
    servers: Vec<ServerReport>,
    groups: usize,
    groups_without_primary: u64,
    stats: MdsStats,
    state_size: StateSize,
    commits: u64,
    frames_sent: u64,
    frames_dropped: u64,
    /// Bytes of frames read from peers and not yet handled (bounded by the memory budgets).
    frames_charged_bytes: u64,
    uptime_s: f64,
}
