//! What each verdict says beyond its outcome: what to do next, how sure it is against its
//! threshold, and why the variant chosen beats the others.

use super::verdicts::{OFFLOAD_MIN_SPEEDUP, WARMUP_MIN_GAIN_POINTS};
use super::*;
use crate::spread;

/// What to do next, how sure, and peak against always off-loading.
pub(super) fn offload_guidance(
    v: &mut Verdict,
    report: &crate::everest::Report,
    per_peak: &[f64],
    (base_ms, speedup): (f64, f64),
    store_mb: Option<&spread::Spread>,
) {
    let lo = per_peak.iter().copied().fold(speedup, f64::min);
    let hi = per_peak.iter().copied().fold(speedup, f64::max);
    v.confidence = Some(Confidence::of(
        speedup,
        (lo, hi),
        OFFLOAD_MIN_SPEEDUP,
        0.1,
        "×",
        &match report.episodes.len() {
            1 => "from one peak: a trace with more peaks would say more".to_owned(),
            n => format!("over {n} peaks"),
        },
    ));
    v.alternatives = offload_alternatives(report, base_ms);
    v.next_step = if v.outcome == Outcome::Applies {
        format!(
            "serve the volume with off-loading at its peaks: `cordillera store serve` on idle volumes with at least {} MB free each, then `cordillera volume serve BASE --store HOST:PORT … --policy peak --t-base {}` (docs/USAGE.md)",
            spread::number(store_mb.map_or(0.0, |m| m.max).max(1.0)),
            report.t_base
        )
    } else {
        "nothing to do: keep the writes on the volume (a volume without stores never off-loads)"
            .into()
    };
}

/// Peak against always off-loading on the same peaks: response and what each moves.
fn offload_alternatives(r: &crate::everest::Report, baseline_ms: f64) -> Vec<String> {
    let weighted = |pick: fn(&crate::everest::Configs) -> &crate::everest::ConfigResult| {
        let (mut n, mut sum, mut bytes) = (0u64, 0.0, 0u64);
        for e in &r.episodes {
            let c = pick(&e.configs);
            if let Some(m) = c.mean_ms {
                n += c.requests;
                sum += m * c.requests as f64;
                bytes += c.offloaded_write_bytes;
            }
        }
        (n > 0).then(|| (sum / n as f64, bytes))
    };
    let (Some((peak, peak_bytes)), Some((always, always_bytes))) =
        (weighted(|c| &c.peak), weighted(|c| &c.always))
    else {
        return Vec::new();
    };
    let mb = |b: u64| spread::number(b as f64 / 1e6);
    vec![
        format!(
            "peak off-loading: {} ms, {}× the baseline's {} ms, moving {} MB to the stores",
            spread::number(peak),
            spread::number(baseline_ms / peak.max(1e-9)),
            spread::number(baseline_ms),
            mb(peak_bytes)
        ),
        format!(
            "always off-loading: {} ms ({}× the baseline), moving {} MB: every write pays the network and the stores' space{}",
            spread::number(always),
            spread::number(baseline_ms / always.max(1e-9)),
            mb(always_bytes),
            if always < peak * 0.95 {
                ", for a faster response in the peaks"
            } else {
                ", for no faster a response: peak off-loading moves writes only while the volume is overloaded"
            }
        ),
    ]
}

/// What to do next, how sure, and each lowest gear's saving.
pub(super) fn gears_guidance(
    v: &mut Verdict,
    s: &crate::sierra::analysis::ScheduleReport,
    saving: f64,
    days: f64,
) {
    v.confidence = Some(Confidence::of(
        saving,
        (saving, saving),
        GEARS_MIN_SAVING * 100.0,
        0.2,
        " %",
        &format!("{days:.1} days of trace"),
    ));
    for p in &s.power {
        v.alternatives.push(format!(
            "g_min = {}: {:.0} % of the chunk servers' energy saved, {:.0} % of them powered on average{}",
            p.g_min,
            (1.0 - p.chunk_servers_over_baseline) * 100.0,
            p.chunk_servers_on * 100.0,
            if p.g_min == 1 {
                " (the lowest gear: one replica's servers on in the trough, the others' writes logged)"
            } else {
                " (a higher lowest gear: more servers on, less saved, more replicas up in the trough)"
            }
        ));
    }
    v.next_step = if v.outcome == Outcome::Applies {
        "run the servers as a Sierra cluster with g_min = 1: `cordillera cluster spec` for the spec, then `cordillera cluster mds` and one `cordillera cluster server` per server (docs/USAGE.md)".into()
    } else {
        "keep every server powered: the load leaves too little to save".into()
    };
}

/// What to do next, how sure, and each warm-up scheme's record.
pub(super) fn warmup_guidance(
    v: &mut Verdict,
    gain_row: Option<&spread::Spread>,
    h: &crate::bonfire::Headline,
    (period, sooner): (&str, bool),
    name: &str,
) {
    if let Some(g) = gain_row {
        v.confidence = Some(Confidence::of(
            g.mean,
            (g.min, g.max),
            WARMUP_MIN_GAIN_POINTS,
            0.2,
            " points",
            &format!(
                "median over {} volume-{period}(s){}",
                h.cases,
                if sooner {
                    "; it also converges sooner than a cold cache, which alone decides"
                } else {
                    ""
                }
            ),
        ));
    }
    for t in &h.algorithms {
        v.alternatives.push(format!(
            "{}: converges soonest in {} of {} case(s), sooner than cold in {}, reduces the server's load more than cold in {}",
            t.algorithm, t.best_converge, h.cases, t.converges_sooner_than_cold, t.reduces_more_load_than_cold
        ));
    }
    v.next_step = if v.outcome == Outcome::Applies {
        format!(
            "serve the volume with a cache and Bonfire's warm-up log: `cordillera volume serve … --cache-size SIZE --warmup-log FILE` (add `--warmup-data` for a sequential pre-load); the lab's best scheme here is {name}"
        )
    } else if v.outcome == Outcome::DoesNotApply {
        "nothing to do: a cold cache does as well here".into()
    } else {
        v.next_step.clone()
    };
}
