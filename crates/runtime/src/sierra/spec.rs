//! The cluster's description: who is where, and the parameters every daemon must agree on.
//! The MDS is given it once (`cordillera cluster mds --spec FILE`), keeps it with its state,
//! and hands it to chunk servers and clients when they connect (they need only the MDS's
//! address). JSON; `docs/FORMATS.md` ("Sierra cluster spec") lists the fields.

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};

use cordillera_gears::layout::{Layout, LayoutKind, LayoutSpec, RackPolicy};
pub use cordillera_gears::load::ServerPerformance;
use cordillera_gears::mds::MdsConfig;
use cordillera_gears::model::{ServerId, Topology};
use cordillera_gears::schedule::GearPolicy;
use cordillera_gears::server::{LoggerInfo, ServerConfig};
use cordillera_types::rng::SplitMix64;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// Every connection's hello carries it: a daemon of another cluster is refused.
    pub cluster: u64,
    pub mds: String,
    /// Rack labels; chunk servers fill them in order, `servers_per_rack` each.
    pub racks: Vec<String>,
    pub servers_per_rack: u32,
    /// Chunk servers by id: where each listens.
    pub servers: Vec<String>,
    pub loggers: Vec<LoggerSpec>,
    #[serde(default = "defaults::chunk_bytes")]
    pub chunk_bytes: u64,
    /// Chunk groups per server (the paper's 64·N groups in all).
    #[serde(default = "defaults::groups_per_server")]
    pub groups_per_server: u32,
    /// Chunks a group holds at most (each server keeps `slots × chunk_bytes` per group).
    #[serde(default = "defaults::slots_per_group")]
    pub slots_per_group: u32,
    #[serde(default = "defaults::replicas")]
    pub replicas: usize,
    #[serde(default = "defaults::layout_seed")]
    pub layout_seed: u64,
    #[serde(default = "defaults::heartbeat_ms")]
    pub heartbeat_ms: u64,
    #[serde(default = "defaults::lease_ms")]
    pub lease_ms: u64,
    #[serde(default = "defaults::heartbeat_timeout_ms")]
    pub heartbeat_timeout_ms: u64,
    /// A server silent this long is declared failed and its groups rebuilt elsewhere.
    #[serde(default = "defaults::permanent_after_s")]
    pub permanent_after_s: u64,
    /// Seconds in an "hour" of the gear plan (3,600; less for tests and demos).
    #[serde(default = "defaults::hour_seconds")]
    pub hour_seconds: u64,
    /// Seconds added to Unix time before hours are counted: where the day starts (a time zone's
    /// offset east of UTC; with compressed hours, any point of the day). Less than a day.
    #[serde(default)]
    pub day_offset_s: u64,
    /// The gear for each hour of the day (24 entries, 1 to `replicas`).
    #[serde(default)]
    pub plan: Vec<u8>,
    /// Where the gears come from: `plan` (the 24 entries above; the default) or `learned` (the
    /// MDS's gear scheduler, §3.4: the chunk servers' load each second, each hour's peak, every
    /// day planned from the days before it; gear r until a day has been measured).
    #[serde(default)]
    pub schedule: Schedule,
    /// The lowest gear the learned schedule uses (§3.7: 1 for power, 2 for availability).
    #[serde(default = "defaults::g_min")]
    pub g_min: usize,
    /// Hours of day the learned schedule keeps in the top gear (§4.3's maintenance window).
    #[serde(default)]
    pub maintenance_hours: Vec<usize>,
    /// What one chunk server sustains, for the load metric L (§3.4; Table 4's by default —
    /// benchmark the servers and give theirs).
    #[serde(default = "defaults::server_performance")]
    pub server_performance: ServerPerformance,
    /// An up-shift of the plan takes effect this long before its hour, so that the servers it
    /// wakes are serving when the hour's load arrives (`schedule::up_shift_lead_ns`: three
    /// wake-up delays). Down-shifts wait for the hour. Shorter than an hour.
    #[serde(default = "defaults::up_shift_lead_ms")]
    pub up_shift_lead_ms: u64,
    /// Reclaim as background work: a chunk server starts no reclaim job (at-risk data
    /// excepted, and one after 2 s without any) while more than this many other operations
    /// are in flight on its disk. `null` (the default): reclaim whatever the load, as the
    /// paper's prototype does.
    #[serde(default = "defaults::reclaim_busy_disk")]
    pub reclaim_busy_disk: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoggerSpec {
    pub addr: String,
    pub rack: String,
    /// The chunk server it shares a machine with, if any.
    #[serde(default)]
    pub server: Option<ServerId>,
}

/// Where the gears come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// The spec's 24 entries.
    #[default]
    Plan,
    /// The MDS's gear scheduler on measured load.
    Learned,
}

mod defaults {
    pub fn g_min() -> usize {
        1
    }
    pub fn server_performance() -> cordillera_gears::load::ServerPerformance {
        cordillera_gears::load::ServerPerformance::sierra_table4()
    }
    pub fn reclaim_busy_disk() -> Option<usize> {
        None
    }
    /// Three of the chunk servers' default wake-up delays (10 s).
    pub fn up_shift_lead_ms() -> u64 {
        30_000
    }
    pub fn chunk_bytes() -> u64 {
        1 << 20
    }
    pub fn groups_per_server() -> u32 {
        64
    }
    pub fn slots_per_group() -> u32 {
        4096
    }
    pub fn replicas() -> usize {
        3
    }
    pub fn layout_seed() -> u64 {
        1
    }
    pub fn heartbeat_ms() -> u64 {
        300
    }
    pub fn lease_ms() -> u64 {
        1000
    }
    pub fn heartbeat_timeout_ms() -> u64 {
        3000
    }
    pub fn permanent_after_s() -> u64 {
        900
    }
    pub fn hour_seconds() -> u64 {
        3600
    }
}

impl ClusterSpec {
    pub fn parse(text: &[u8]) -> Result<ClusterSpec> {
        let spec: ClusterSpec = serde_json::from_slice(text).context("the cluster spec")?;
        spec.check()?;
        Ok(spec)
    }

    /// This spec with fields set from `FIELD=VALUE` texts (the value as JSON, or else as a
    /// string), checked as a whole.
    pub fn with_settings(&self, settings: &[String]) -> Result<ClusterSpec> {
        let mut value = serde_json::to_value(self)?;
        for setting in settings {
            let Some((field, text)) = setting.split_once('=') else {
                bail!("--set {setting:?}: expected FIELD=VALUE");
            };
            let v = serde_json::from_str(text)
                .unwrap_or_else(|_| serde_json::Value::String(text.to_owned()));
            value[field] = v;
        }
        let text = serde_json::to_vec(&value)?;
        ClusterSpec::parse(&text)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a spec serializes")
    }

    /// Refuses a spec the cores could not run.
    pub fn check(&self) -> Result<()> {
        ensure!(!self.racks.is_empty(), "the spec names no racks");
        ensure!(self.servers_per_rack > 0, "servers_per_rack is 0");
        ensure!(
            self.servers.len() == self.racks.len() * self.servers_per_rack as usize,
            "{} servers listed, {} racks × {} expected",
            self.servers.len(),
            self.racks.len(),
            self.servers_per_rack
        );
        ensure!(
            (2..=8).contains(&self.replicas),
            "replicas must be 2 to 8 (not {})",
            self.replicas
        );
        ensure!(
            self.racks.len() >= self.replicas,
            "{} racks cannot hold {} replicas on distinct racks",
            self.racks.len(),
            self.replicas
        );
        ensure!(
            self.chunk_bytes >= 4096 && self.chunk_bytes.is_power_of_two(),
            "chunk_bytes must be a power of two of at least 4096"
        );
        ensure!(self.groups_per_server > 0, "groups_per_server is 0");
        ensure!(self.slots_per_group > 0, "slots_per_group is 0");
        self.group_bytes()?;
        ensure!(
            self.heartbeat_ms > 0 && self.heartbeat_ms < self.lease_ms,
            "heartbeats must come more often than leases last"
        );
        ensure!(
            self.heartbeat_timeout_ms > self.lease_ms,
            "the heartbeat timeout must be longer than a lease (leases lapse before primaries move)"
        );
        ensure!(self.hour_seconds > 0, "hour_seconds is 0");
        ensure!(
            self.plan.is_empty() || self.plan.len() == 24,
            "the plan has {} hours, not 24",
            self.plan.len()
        );
        ensure!(
            self.up_shift_lead_ms < self.hour_seconds * 1000,
            "up_shift_lead_ms ({}) must be shorter than an hour of the plan ({} s)",
            self.up_shift_lead_ms,
            self.hour_seconds
        );
        self.gear_policy()?;
        ensure!(
            self.day_offset_s < 24 * self.hour_seconds,
            "day_offset_s ({}) must be less than a day of the plan ({} s)",
            self.day_offset_s,
            24 * self.hour_seconds
        );
        let p = &self.server_performance;
        ensure!(
            [
                p.read_iops,
                p.write_iops,
                p.read_bytes_per_s,
                p.write_bytes_per_s
            ]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0),
            "server_performance: every figure must be positive"
        );
        ensure!(
            self.schedule == Schedule::Plan || self.plan.is_empty(),
            "a learned schedule makes its own plan: leave `plan` out"
        );
        for &g in &self.plan {
            ensure!(
                g >= 1 && g as usize <= self.replicas,
                "gear {g} in the plan is outside 1..={}",
                self.replicas
            );
        }
        for l in &self.loggers {
            ensure!(
                self.racks.contains(&l.rack),
                "logger {} is on rack {:?}, which the spec does not name",
                l.addr,
                l.rack
            );
            if let Some(s) = l.server {
                ensure!(
                    (s as usize) < self.servers.len(),
                    "logger {} names server {s}",
                    l.addr
                );
            }
        }
        let logger_racks: std::collections::BTreeSet<&String> =
            self.loggers.iter().map(|l| &l.rack).collect();
        ensure!(
            logger_racks.len() >= self.replicas,
            "loggers on {} racks: logging mode needs {} (one copy per rack)",
            logger_racks.len(),
            self.replicas
        );
        Ok(())
    }

    /// Bytes of one group's address space on a chunk server.
    pub fn group_bytes(&self) -> Result<u64> {
        match self.chunk_bytes.checked_mul(self.slots_per_group as u64) {
            Some(b) if b <= 1 << 44 => Ok(b),
            _ => bail!("chunk_bytes × slots_per_group is too large"),
        }
    }

    pub fn topology(&self) -> Topology {
        Topology::racks(self.racks.len() as u32, self.servers_per_rack)
    }

    /// The rack label of a chunk server.
    pub fn rack_of(&self, server: ServerId) -> &str {
        &self.racks[(server / self.servers_per_rack) as usize]
    }

    /// Power-aware grouping with racks aligned (§3.3): gear group k is rack k's servers when
    /// there are r racks.
    pub fn layout(&self) -> Result<Layout> {
        let spec = LayoutSpec {
            kind: LayoutKind::PowerAware,
            racks: RackPolicy::Aligned,
            replicas: self.replicas,
        };
        let groups = self.servers.len() * self.groups_per_server as usize;
        Layout::generate(
            spec,
            &self.topology(),
            groups,
            &mut SplitMix64(self.layout_seed),
        )
        .map_err(|e| anyhow::anyhow!("no layout for this cluster: {e}"))
    }

    pub fn mds_config(&self) -> Result<MdsConfig> {
        Ok(MdsConfig {
            lease_ns: self.lease_ms * 1_000_000,
            heartbeat_timeout_ns: self.heartbeat_timeout_ms * 1_000_000,
            permanent_after_ns: self.permanent_after_s * 1_000_000_000,
            slots_per_group_max: self.slots_per_group,
            seed: self.cluster,
            ..MdsConfig::new(self.chunk_bytes)
        })
    }

    pub fn logger_infos(&self) -> Vec<LoggerInfo> {
        self.loggers
            .iter()
            .enumerate()
            .map(|(i, l)| LoggerInfo {
                id: i as u64,
                rack: self
                    .racks
                    .iter()
                    .position(|r| *r == l.rack)
                    .expect("checked") as u32,
                server: l.server,
            })
            .collect()
    }

    pub fn server_config(&self, server: ServerId) -> Result<ServerConfig> {
        let mut c = ServerConfig::new(
            server,
            self.chunk_bytes,
            self.group_bytes()?,
            self.topology().racks_of_servers,
            self.logger_infos(),
        );
        c.heartbeat_interval_ns = self.heartbeat_ms * 1_000_000;
        c.suspect_ns = self.heartbeat_timeout_ms * 1_000_000;
        c.log_copies = self.replicas;
        c.reclaim_busy_disk = self.reclaim_busy_disk;
        Ok(c)
    }

    /// A local cluster on loopback: `racks` racks of `per_rack` chunk servers and a logger per
    /// rack, on consecutive ports from `base_port` (MDS first).
    pub fn local(cluster: u64, racks: usize, per_rack: u32, base_port: u16) -> ClusterSpec {
        let addr = |i: usize| format!("127.0.0.1:{}", base_port as usize + i);
        let n = racks * per_rack as usize;
        ClusterSpec {
            cluster,
            mds: addr(0),
            racks: (0..racks).map(|r| format!("r{r}")).collect(),
            servers_per_rack: per_rack,
            servers: (0..n).map(|s| addr(1 + s)).collect(),
            loggers: Self::local_loggers(racks, per_rack, 1, base_port),
            chunk_bytes: defaults::chunk_bytes(),
            groups_per_server: 16,
            slots_per_group: defaults::slots_per_group(),
            replicas: 3,
            layout_seed: 1,
            heartbeat_ms: defaults::heartbeat_ms(),
            lease_ms: defaults::lease_ms(),
            heartbeat_timeout_ms: defaults::heartbeat_timeout_ms(),
            permanent_after_s: defaults::permanent_after_s(),
            hour_seconds: defaults::hour_seconds(),
            day_offset_s: 0,
            plan: Vec::new(),
            schedule: Schedule::Plan,
            g_min: defaults::g_min(),
            maintenance_hours: Vec::new(),
            server_performance: defaults::server_performance(),
            up_shift_lead_ms: defaults::up_shift_lead_ms(),
            reclaim_busy_disk: defaults::reclaim_busy_disk(),
        }
    }

    /// `k` loggers per rack for [`local`](Self::local)'s port plan: logger i on rack i mod
    /// `racks`, on the ports after the chunk servers'.
    pub fn local_loggers(racks: usize, per_rack: u32, k: usize, base_port: u16) -> Vec<LoggerSpec> {
        let n = racks * per_rack as usize;
        (0..racks * k)
            .map(|i| LoggerSpec {
                addr: format!("127.0.0.1:{}", base_port as usize + 1 + n + i),
                rack: format!("r{}", i % racks),
                server: None,
            })
            .collect()
    }

    /// How the learned schedule turns loads into gears (N chunk servers, r, g_min, the
    /// maintenance hours).
    pub fn gear_policy(&self) -> Result<GearPolicy> {
        GearPolicy::new(
            self.servers.len(),
            self.replicas,
            self.g_min,
            self.maintenance_hours.clone(),
        )
        .map_err(|e| anyhow::anyhow!("the gear policy: {e}"))
    }

    /// The plan's gear for `hour` of the day (the top gear without a plan).
    pub fn planned_gear(&self, hour: u64) -> usize {
        self.plan
            .get((hour % 24) as usize)
            .map_or(self.replicas, |&g| g as usize)
    }

    /// The plan at `unix_ms` (milliseconds since the Unix epoch): the hour index (hours of
    /// `hour_seconds` since the epoch) whose gear applies, with up-shifts `up_shift_lead_ms`
    /// early. Day `index / 24` picks the rotation of the gear groups.
    pub fn plan_at(&self, unix_ms: u64) -> (u64, usize) {
        self.gear_at(unix_ms, |hour| self.planned_gear(hour % 24))
    }

    /// As [`plan_at`](Self::plan_at) for any plan: `gear_of` gives the gear of an hour index
    /// (hours of `hour_seconds` since the epoch).
    pub fn gear_at(&self, unix_ms: u64, gear_of: impl Fn(u64) -> usize) -> (u64, usize) {
        let hour_ms = self.hour_seconds * 1000;
        let now = unix_ms / hour_ms;
        let ahead = (unix_ms + self.up_shift_lead_ms) / hour_ms;
        let (g_now, g_ahead) = (gear_of(now), gear_of(ahead));
        if g_ahead > g_now {
            (ahead, g_ahead)
        } else {
            (now, g_now)
        }
    }

    /// Milliseconds from `unix_ms` to the next moment the plan may change its gear.
    pub fn next_plan_change_ms(&self, unix_ms: u64) -> u64 {
        let hour_ms = self.hour_seconds * 1000;
        let to_hour = hour_ms - unix_ms % hour_ms;
        let to_lead = hour_ms - (unix_ms + self.up_shift_lead_ms) % hour_ms;
        to_hour.min(to_lead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_shifts_take_effect_the_lead_early_and_down_shifts_on_the_hour() {
        let mut spec = ClusterSpec::local(7, 3, 2, 7000);
        spec.hour_seconds = 10;
        spec.up_shift_lead_ms = 3000;
        spec.plan = vec![1; 24];
        spec.plan[2] = 3;
        // Hour 1 (10–20 s): gear 1 until 17 s, then hour 2's gear 3.
        assert_eq!(spec.plan_at(16_999), (1, 1));
        assert_eq!(spec.plan_at(17_000), (2, 3));
        assert_eq!(spec.plan_at(29_999), (2, 3));
        // The down-shift back to gear 1 waits for hour 3.
        assert_eq!(spec.plan_at(30_000), (3, 1));
        // Next changes: the lead point, then the hour.
        assert_eq!(spec.next_plan_change_ms(15_000), 2_000);
        assert_eq!(spec.next_plan_change_ms(17_000), 3_000);
        assert_eq!(spec.next_plan_change_ms(20_000), 7_000);
        // Day 1 starts at hour index 24.
        assert_eq!(spec.plan_at(24 * 10_000 + 1).0 / 24, 1);
    }

    #[test]
    fn a_local_spec_round_trips_and_builds_its_layout_and_configs() {
        let spec = ClusterSpec::local(7, 3, 2, 7000);
        spec.check().unwrap();
        let again = ClusterSpec::parse(spec.to_json().as_bytes()).unwrap();
        assert_eq!(again, spec);
        let layout = spec.layout().unwrap();
        assert_eq!(layout.unit_count(), 6 * 16);
        assert_eq!(spec.rack_of(3), "r1");
        let c = spec.server_config(5).unwrap();
        assert_eq!(c.loggers.len(), 3);
        assert_eq!(c.group_bytes, 4096 << 20);
        assert_eq!(spec.mds_config().unwrap().slots_per_group_max, 4096);
    }

    #[test]
    fn specs_the_cores_cannot_run_are_refused_with_a_reason() {
        let good = ClusterSpec::local(7, 3, 2, 7000);
        let refused = |f: &dyn Fn(&mut ClusterSpec)| {
            let mut s = good.clone();
            f(&mut s);
            s.check().unwrap_err().to_string()
        };
        assert!(refused(&|s| s.servers.pop().map(drop).unwrap()).contains("servers listed"));
        assert!(refused(&|s| s.replicas = 4).contains("racks cannot hold"));
        assert!(refused(&|s| s.lease_ms = 5000).contains("heartbeat timeout"));
        assert!(refused(&|s| s.plan = vec![3; 23]).contains("24"));
        assert!(refused(&|s| s.plan = vec![0; 24]).contains("gear 0"));
        assert!(refused(&|s| s.up_shift_lead_ms = 3_600_000).contains("shorter than an hour"));
        assert!(refused(&|s| s.loggers[0].rack = "x".into()).contains("does not name"));
        assert!(refused(&|s| s.loggers.truncate(2)).contains("logging mode"));
        assert!(refused(&|s| s.chunk_bytes = 1000).contains("power of two"));
        assert!(ClusterSpec::parse(b"{\"cluster\": 1, \"bogus\": 2}").is_err());
        assert!(ClusterSpec::parse(b"not json").is_err());
        // The learned schedule's settings.
        assert!(refused(&|s| s.g_min = 4).contains("g_min = 4"));
        assert!(refused(&|s| s.maintenance_hours = vec![24]).contains("hour 24"));
        assert!(refused(&|s| s.day_offset_s = 24 * 3600).contains("less than a day"));
        assert!(refused(&|s| s.server_performance.read_iops = 0.0).contains("positive"));
        assert!(refused(&|s| {
            s.schedule = Schedule::Learned;
            s.plan = vec![1; 24];
        })
        .contains("leave `plan` out"));
    }

    #[test]
    fn fields_are_set_by_name_with_json_or_text_values() {
        let good = ClusterSpec::local(7, 3, 2, 7000);
        let s = good
            .with_settings(&[
                "schedule=learned".into(),
                "maintenance_hours=[0,1]".into(),
                "g_min=2".into(),
            ])
            .unwrap();
        assert_eq!(s.schedule, Schedule::Learned);
        assert_eq!((s.maintenance_hours, s.g_min), (vec![0, 1], 2));
        let e = |set: &str| format!("{:#}", good.with_settings(&[set.into()]).unwrap_err());
        assert!(e("bogus=1").contains("unknown field"), "{}", e("bogus=1"));
        assert!(e("g_min").contains("FIELD=VALUE"));
        assert!(format!(
            "{:#}",
            good.with_settings(&["g_min=abc".into()]).unwrap_err()
        )
        .contains("invalid type"));
    }
}
