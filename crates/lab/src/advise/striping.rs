//! The striping verdict: the paper's rule from what the trace shows (request sizes, rates,
//! how stable the load is, how busy the busiest volume would keep an array), and with four
//! or more busy volumes the paper's §3.4 experiment on them, which decides.

use std::sync::Arc;

use crate::striping::skew::{Records, SkewOptions, Source};
use cordillera_striping::policy::{self, Knowledge, Setting};

use super::verdicts::{arg, find, verdict};
use super::*;
use crate::spread::{self, Figure};

/// The §3.4 experiment's arrays: a narrow layout needs a busy volume on each.
pub const SIM_ARRAYS: usize = 4;
/// The simulated span's bounds, s (`lab striping --duration-s`'s).
pub const SIM_MIN_S: u64 = 10;
pub const SIM_MAX_S: u64 = 1_000_000;
/// Wide striping counts as comparable when its mean response, over the streams, is within
/// this factor of narrow's (the paper's Figure 8 reads "comparable" the same way).
pub const COMPARABLE: f64 = 1.1;

/// Narrow or wide striping: the paper's advice from what the trace shows.
pub fn striping(
    c: &Characterization,
    device: &crate::devices::DeviceChoice,
    open: &Open,
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Verdict {
    const M: &str = "striping";
    const P: &str = "narrow vs wide striping (the striping paper, §3.6, §5)";
    if let Some(reason) = striping_evidence(c) {
        return verdict(M, P, Outcome::CannotJudge, reason, vec![]);
    }
    let (rec, utilization, mut why) = rule(c, device);
    let skew = load_skew(c);
    why.extend(conditions(c, utilization, skew));
    let sim = simulate(c, &device.spec, open, o, progress);
    let figures = rule_figures(&rec, skew, utilization);
    let rule = match rec.policy {
        policy::Policy::Wide => "wide",
        policy::Policy::Narrow => "narrow",
    };
    let mut commands = vec![format!("cordillera trace stats {}", arg(o))];
    let (name, sim_rows) = match sim {
        Ok(Some((runs, duration_s))) => {
            let rows = spread::spread(&runs);
            let ratio = find(&rows, "fig8/geomean_mean");
            let share = find(&rows, "fig8/comparable_or_better_mean");
            let name = match ratio {
                Some(r) if r.mean > COMPARABLE => "narrow",
                Some(_) => "wide",
                None => rule,
            };
            if let (Some(r), Some(sh)) = (ratio, share) {
                why.push(format!(
                    "simulated (§3.4): the trace's {} busy volumes on {SIM_ARRAYS} arrays, each {}, narrow partitioned on the whole trace's loads (the best case for narrow) against each striped over all arrays: wide's mean response is {} narrow's (geometric mean over the volumes), {} of the volumes comparable or better",
                    busy_volumes(c),
                    device.spec.describe(),
                    over_seeds(r, |x| format!("{}×", spread::number(x))),
                    over_seeds(sh, |x| format!("{:.0} %", x * 100.0))
                ));
            }
            if c.duration_s + 1.0 > SIM_MAX_S as f64 {
                why.push(format!(
                    "the simulation covers the trace's first {duration_s} s of {:.0}",
                    c.duration_s
                ));
            }
            if name != rule {
                why.push(format!(
                    "the simulation overrules the rule ({rule}): on this trace narrow striping is better when its partition fits the loads; that holds only while the loads stay as they are"
                ));
            }
            commands.push(format!(
                "cordillera lab striping --figures 8 --trace {} {} --duration-s {duration_s} --seed {} --seeds {}",
                arg(o),
                sim_flags(&device.spec),
                o.seed,
                runs.len()
            ));
            (name, rows)
        }
        Ok(None) => {
            let mut v = verdict(
                M,
                P,
                Outcome::CannotJudge,
                format!(
                    "not simulated: §3.4's experiment, which decides, partitions busy volumes onto {SIM_ARRAYS} arrays, and this trace has {} busy volume(s); the paper's rule alone would say {rule}",
                    busy_volumes(c)
                ),
                why,
            );
            v.figures = spread::spread(&[(o.seed, figures)]);
            v.commands = commands;
            return v;
        }
        Err(e) => {
            let mut v = verdict(
                M,
                P,
                Outcome::CannotJudge,
                format!("the simulation failed: {e}"),
                why,
            );
            v.commands = commands;
            return v;
        }
    };
    let mut v = verdict(
        M,
        P,
        Outcome::Applies,
        format!(
            "{name}, stripe unit {} KiB{}",
            rec.stripe_unit_bytes >> 10,
            match find(&sim_rows, "fig8/geomean_mean") {
                Some(r) => format!(
                    " (simulated on its volumes: wide's mean response {} narrow's)",
                    over_seeds(r, |x| format!("{}×", spread::number(x)))
                ),
                None => String::new(),
            }
        ),
        why,
    );
    if let (Some(r), Some(sh)) = (
        find(&sim_rows, "fig8/geomean_mean"),
        find(&sim_rows, "fig8/comparable_or_better_mean"),
    ) {
        v.confidence = Some(super::Confidence::of(
            r.mean,
            (r.min, r.max),
            COMPARABLE,
            0.05,
            "×",
            "wide's mean response over narrow's: above it narrow wins",
        ));
        v.alternatives = vec![
            format!(
                "wide (every volume striped over all {SIM_ARRAYS} arrays): mean response {}× narrow's, {:.0} % of the volumes comparable or better; nothing to re-plan when the loads change",
                spread::number(r.mean),
                sh.mean * 100.0
            ),
            "narrow (each volume on one array, partitioned on the whole trace's loads — its best case): needs the loads known in advance and a new partition, with migration, whenever they change".into(),
        ];
    }
    v.next_step = format!(
        "place the volumes {name} in a pool: `cordillera pool create-volume NAME --size SIZE --policy {name} --stripe-unit {}k` (docs/USAGE.md)",
        rec.stripe_unit_bytes >> 10
    );
    v.figures = spread::spread(&[(o.seed, figures)]);
    v.figures.extend(sim_rows);
    v.commands = commands;
    v
}

/// The figures behind the rule: its stripe unit, the trace's load skew, and the busiest
/// array's estimated utilization under narrow.
fn rule_figures(
    rec: &policy::Recommendation,
    skew: Option<f64>,
    utilization: Option<f64>,
) -> Vec<Figure> {
    let mut figures = vec![Figure::new(
        "striping/stripe_unit_kib",
        "stripe unit",
        "KiB",
        (rec.stripe_unit_bytes >> 10) as f64,
        "half the mean request size (§3.6)",
    )];
    if let Some(k) = skew {
        figures.push(Figure::new(
            "striping/load_skew_peak_to_mean",
            "busy volumes' busiest window over their mean rate, weighted by requests",
            "ratio",
            k,
            "",
        ));
    }
    if let Some(u) = utilization {
        figures.push(Figure::new(
            "striping/narrow_peak_utilization_pct",
            "busiest array's utilization, narrow layout (estimate)",
            "%",
            u * 100.0,
            "",
        ));
    }
    figures
}

/// The paper's rule on what the trace shows, the busiest array's estimated utilization on the
/// device, and the reasons in words.
fn rule(
    c: &Characterization,
    device: &crate::devices::DeviceChoice,
) -> (policy::Recommendation, Option<f64>, Vec<String>) {
    let t = &c.stats.total;
    let span = t.span_s.max(1e-9);
    let knowledge = Knowledge {
        mean_request_bytes: t.mean_request_bytes.map(|m| m.round() as u64),
        large_requests: None,
        read_iops: Some(t.reads as f64 / span),
        write_iops: Some(t.writes as f64 / span),
    };
    let (busiest, utilization) = narrow_peak_utilization(c, &device.spec);
    let (stable, days) = stable_days(c);
    let setting = Setting {
        utilization,
        workload_known: stable,
        migration: false,
        qos_scheduling: false,
        mixed_qos: false,
    };
    let rec = policy::recommend(&knowledge, &setting);
    let mut why = Vec::new();
    why.push(format!(
        "{} volume(s); mean request {}; {:.0} % reads",
        c.volumes,
        t.mean_request_bytes
            .map_or("unknown".into(), |m| format!("{:.1} KiB", m / 1024.0)),
        c.read_pct.unwrap_or(0.0)
    ));
    if let (Some(u), Some(v)) = (utilization, busiest) {
        why.push(format!(
            "the busiest volume ({}) at its busiest {} would keep {} {:.0} % busy{} (estimated from the disk model's random IOPS per member, a RAID-5 write costing 4 operations, a mirrored one 2)",
            v.volume,
            c.rate_window(),
            device.description,
            u * 100.0,
            if u > 1.0 {
                ": more than it can serve, overloaded"
            } else {
                ""
            }
        ));
    }
    why.push(if stable {
        format!("the load is stable over {days} whole days (each within 20 % of their mean)")
    } else {
        "the load is not shown stable over two whole days or more, so it is not known precisely"
            .into()
    });
    why.extend(rec.reasons.iter().map(|r| format!("the paper's rule: {r}")));
    (rec, utilization, why)
}

/// A volume whose busiest window carries this many times its mean rate counts as skewed: in
/// `lab striping`'s Figure 8, streams with no such variation (the looped WebSearch minute, 1.0)
/// gave wide striping nothing (wide/narrow 1.00), Table 2's generated streams (rates redrawn
/// every ~30 s) 0.92, and the recorded fragments (CloudPhysics 20, hm_0 4.3) 0.27 (docs/LAB.md).
pub const SKEWED_PEAK_TO_MEAN: f64 = 2.0;
/// Windows a trace must span for its peak-to-mean to say anything.
pub const SKEW_MIN_WINDOWS: f64 = 10.0;

/// The busy volumes' peak-to-mean rate over the trace's windows, weighted by their requests;
/// `None` when the trace spans too few windows.
fn load_skew(c: &Characterization) -> Option<f64> {
    if !c.has_time || c.duration_s < SKEW_MIN_WINDOWS * c.stats.window_s {
        return None;
    }
    let v = &c.stats.volumes;
    let mean = v.iter().map(|v| v.records).sum::<u64>() as f64 / v.len().max(1) as f64;
    let (mut sum, mut weight) = (0.0, 0.0);
    for v in v.iter().filter(|v| v.records as f64 >= 0.01 * mean) {
        if let Some(k) = v.peak_to_mean {
            sum += k * v.records as f64;
            weight += v.records as f64;
        }
    }
    (weight > 0.0).then(|| sum / weight)
}

/// The paper's three conditions for wide striping (§3.6: high utilization, load skew, large
/// requests), each against what the trace shows, and what our lab found of each.
fn conditions(c: &Characterization, utilization: Option<f64>, skew: Option<f64>) -> Vec<String> {
    let met = |m: bool| if m { "met" } else { "not met" };
    let mut out = Vec::new();
    out.push(match utilization {
        Some(u) => format!(
            "the paper's condition of high utilization (narrow's busiest array at {:.0} % or more): {} ({:.0} %); our lab agrees that wide gains as load rises, for large requests past narrow, for small ones only toward it (Figure 4: 1.61× → 1.24× from 26 % to 56 % busy, docs/LAB.md)",
            policy::LOW_UTILIZATION * 100.0,
            met(u >= policy::LOW_UTILIZATION),
            u * 100.0
        ),
        None => "the paper's condition of high utilization: unknown (no disk model for the device)".into(),
    });
    out.push(match skew {
        Some(k) => format!(
            "the paper's condition of load skew (a volume's busiest {} at {SKEWED_PEAK_TO_MEAN}× its mean or more): {} ({}× over the busy volumes); our lab: skew is what makes wide win for small requests too (Figures 8–10 on recorded fragments: wide's mean response 0.27× narrow's)",
            c.rate_window(),
            met(k >= SKEWED_PEAK_TO_MEAN),
            spread::number(k)
        ),
        None => format!(
            "the paper's condition of load skew: unknown (the trace spans fewer than {SKEW_MIN_WINDOWS:.0} windows of {} s)",
            c.stats.window_s
        ),
    });
    out.push(match c.stats.total.mean_request_bytes {
        Some(m) => format!(
            "the paper's condition of large requests (over {} KiB): {} (mean {:.1} KiB); our lab agrees for large requests (Figures 2, 5) and finds small ones slower wide wherever the load is steady (Figures 2(b), 3, 4)",
            policy::SMALL_REQUEST >> 10,
            met(m > policy::SMALL_REQUEST as f64),
            m / 1024.0
        ),
        None => "the paper's condition of large requests: unknown (no request sizes)".into(),
    });
    out
}

/// A figure in its own words, with its range when the seeds differ.
fn over_seeds(s: &spread::Spread, text: impl Fn(f64) -> String) -> String {
    if s.values.len() > 1 && s.min != s.max {
        format!(
            "{} ({}–{} over {} seeds)",
            text(s.mean),
            text(s.min),
            text(s.max),
            s.values.len()
        )
    } else {
        text(s.mean)
    }
}

/// Volumes with at least 1 % of the mean volume's requests (§3.4 drops the near-idle ones).
fn busy_volumes(c: &Characterization) -> usize {
    let v = &c.stats.volumes;
    let mean = v.iter().map(|v| v.records).sum::<u64>() as f64 / v.len().max(1) as f64;
    v.iter()
        .filter(|v| v.records > 0 && v.records as f64 >= 0.01 * mean)
        .count()
}

/// §3.4 on the trace's volumes over the whole trace, once per seed (the greedy partition's
/// restarts are seeded): each seed's figures, and the simulated seconds. `None` when the
/// trace has too few busy volumes or no timestamps.
#[allow(clippy::type_complexity)]
fn simulate(
    c: &Characterization,
    device: &crate::devices::DeviceSpec,
    open: &Open,
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Option<(Vec<(u64, Vec<Figure>)>, u64)>, String> {
    if !c.has_time || busy_volumes(c) < SIM_ARRAYS {
        return Ok(None);
    }
    // The whole trace, within what `lab striping` accepts (10 s to 10^6 s: the first 11.6
    // days of a longer trace; a shorter one simply ends early).
    let duration_s = (c.duration_s.ceil() as u64 + 1).clamp(SIM_MIN_S, SIM_MAX_S);
    let reopen = open.clone();
    let source = Source {
        names: c.volume_names.clone(),
        open: Arc::new(move || -> Result<Records, String> {
            let mut reader = reopen()?;
            Ok(Box::new(std::iter::from_fn(move || {
                reader.next_record().map_err(|e| e.to_string()).transpose()
            })))
        }),
        description: c.source.clone(),
    };
    let mut runs = Vec::new();
    for seed in o.seed_list() {
        progress(&format!(
            "striping, seed {seed}: {} volumes narrow and wide on {SIM_ARRAYS} arrays, each {}, over {duration_s} s",
            busy_volumes(c),
            device.describe()
        ));
        let options = SkewOptions::paper(duration_s as f64, seed).on_device(device)?;
        let r = crate::striping::run_skew_with(&source, &options)?;
        runs.push((seed, crate::striping::skew_figures(&r)));
    }
    Ok(Some((runs, duration_s)))
}

/// `lab striping`'s flags for the simulation's arrays: the user's device, its array without
/// the stripe unit (§3.4's stays), or one device per array.
fn sim_flags(device: &crate::devices::DeviceSpec) -> String {
    match &device.array {
        None => format!("--device {} --array none", device.kind.name),
        Some(a) => format!(
            "--device {} --array {}",
            device.kind.name,
            crate::devices::array_text(a)
                .rsplit_once(':')
                .map_or(String::new(), |(head, _)| head.to_owned())
        ),
    }
}

/// Requests a striping verdict needs at least.
pub const STRIPING_MIN_REQUESTS: u64 = 1000;

/// Why the trace cannot support a striping verdict, if it cannot: rates need timestamps,
/// placing volumes needs two or more, and a handful of requests says nothing of a load.
fn striping_evidence(c: &Characterization) -> Option<String> {
    if !c.has_time {
        return Some(
            "the trace has no timestamps: striping is judged on request rates and how busy they keep the arrays"
                .into(),
        );
    }
    if c.volumes < 2 {
        return Some(format!(
            "the trace has {} volume: striping decides how several volumes share arrays",
            c.volumes
        ));
    }
    if c.records < STRIPING_MIN_REQUESTS {
        return Some(format!(
            "the trace has {} requests: fewer than {STRIPING_MIN_REQUESTS} say nothing of a load",
            c.records
        ));
    }
    None
}

/// The busiest volume at its busiest window on the user's device (an array: each member's
/// random IOPS measured on the model; a RAID-5 write costs 4 member operations, a mirrored one
/// 2): the narrow layout's hottest array, and how busy it would be — unclamped, over 1 when it
/// could not keep up.
fn narrow_peak_utilization<'a>(
    c: &'a Characterization,
    device: &crate::devices::DeviceSpec,
) -> (
    Option<&'a cordillera_trace::stats::VolumeStats>,
    Option<f64>,
) {
    use cordillera_models::device::raid::RaidLevel;
    let disk = crate::sierra::benchmark_server(device.kind.preset).ok();
    let (members, write_cost) = match &device.array {
        None => (1.0, 1.0),
        Some(a) => (
            a.disks as f64,
            match a.level {
                RaidLevel::Raid0 => 1.0,
                RaidLevel::Raid1 | RaidLevel::Raid10 => 2.0,
                RaidLevel::Raid5 => 4.0,
            },
        ),
    };
    let busiest = c
        .stats
        .volumes
        .iter()
        .max_by(|a, b| a.peak_rate_per_s.total_cmp(&b.peak_rate_per_s));
    let utilization = match (disk, busiest) {
        (Some(d), Some(v)) if v.records > 0 => {
            let w = v.writes as f64 / v.records as f64;
            let weighted = v.peak_rate_per_s * (1.0 - w) + write_cost * v.peak_rate_per_s * w;
            Some(weighted / (members * d.read_iops))
        }
        _ => None,
    };
    (busiest, utilization)
}

/// Whether the load is stable: two whole days or more, each within 20 % of their mean; and
/// how many whole days there are.
fn stable_days(c: &Characterization) -> (bool, usize) {
    let daily: Vec<f64> = c
        .profile
        .as_ref()
        .map(|p| {
            p.days
                .iter()
                .filter(|d| d.covered_s >= 86_000.0)
                .map(|d| d.mean_iops)
                .collect()
        })
        .unwrap_or_default();
    let stable = daily.len() >= 2 && {
        let mean = daily.iter().sum::<f64>() / daily.len() as f64;
        daily.iter().all(|d| (d - mean).abs() <= 0.2 * mean)
    };
    (stable, daily.len())
}
