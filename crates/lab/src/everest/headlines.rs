//! The figures `--seeds` spreads, each beside the paper's statement.

use super::*;
use crate::spread::Figure;

/// The figures being gathered, each given the paper's statement only when it applies.
struct Headlines {
    out: Vec<Figure>,
    beside_paper: bool,
}

impl Headlines {
    /// Adds figure `key` when it has a value; the paper's statement is kept when the run
    /// replays the paper's workload (or our stand-in), and always for Figure 13.
    fn push(
        &mut self,
        key: String,
        label: String,
        unit: &'static str,
        v: Option<f64>,
        paper: &str,
    ) {
        let paper = if self.beside_paper || key.starts_with("fig13") {
            paper
        } else {
            ""
        };
        if let Some(v) = v {
            self.out.push(Figure::new(key, label, unit, v, paper));
        }
    }
}

/// The report's figures for the spread over seeds (`--seeds`), each beside the paper's value as
/// the paper states it (Tables 2 and 3, §4.1's text, Figure 13's text) when `beside_paper` (the
/// run replays the paper's workload, or our stand-in for it); the micro-benchmarks always.
pub fn headlines(r: &Report, beside_paper: bool) -> Vec<Figure> {
    let mut h = Headlines {
        out: Vec::new(),
        beside_paper,
    };
    episode_figures(&mut h, r);
    part_figures(&mut h, r);
    micro_figures(&mut h, r);
    h.out
}

/// Each episode's start, response times and off-loaded data, beside Tables 2 and 3.
fn episode_figures(h: &mut Headlines, r: &Report) {
    let paper_baseline = ["1.53 s", "0.06 s", "0.04 s"];
    let paper_p99 = ["11.2 s", "0.6 s", "0.4 s"];
    let paper_gain = [
        "almost two orders of magnitude",
        "significant",
        "significant",
    ];
    for e in &r.episodes {
        let k = e.rank;
        let i = k.saturating_sub(1).min(2);
        let c = &e.configs;
        h.push(
            format!("episode{k}/start_s"),
            format!("episode {k}: start"),
            "s",
            Some(e.start_s),
            "",
        );
        h.push(
            format!("episode{k}/baseline/mean_ms"),
            format!("episode {k}: baseline mean"),
            "ms",
            c.baseline.mean_ms,
            paper_baseline[i],
        );
        h.push(
            format!("episode{k}/baseline/p99_ms"),
            format!("episode {k}: baseline p99"),
            "ms",
            c.baseline.p99_ms,
            paper_p99[i],
        );
        h.push(
            format!("episode{k}/always/mean_ms"),
            format!("episode {k}: always off-load mean"),
            "ms",
            c.always.mean_ms,
            "",
        );
        h.push(
            format!("episode{k}/peak/mean_ms"),
            format!("episode {k}: peak off-load mean"),
            "ms",
            c.peak.mean_ms,
            "",
        );
        h.push(
            format!("episode{k}/peak/speedup"),
            format!("episode {k}: peak off-load speed-up"),
            "×",
            e.peak_speedup,
            paper_gain[i],
        );
        h.push(
            format!("episode{k}/always/speedup"),
            format!("episode {k}: always off-load speed-up"),
            "×",
            e.always_speedup,
            paper_gain[i],
        );
        h.push(
            format!("episode{k}/peak/offloaded_max_mb"),
            format!("episode {k}: peak off-load, largest off-loaded"),
            "MB",
            Some(c.peak.offloaded_max_bytes as f64 / 1e6),
            "",
        );
        h.push(
            format!("episode{k}/always/write_mean_ms"),
            format!("episode {k}: always off-load writes"),
            "ms",
            c.always.write_mean_ms,
            "",
        );
        h.push(
            format!("episode{k}/peak/write_mean_ms"),
            format!("episode {k}: peak off-load writes"),
            "ms",
            c.peak.write_mean_ms,
            "",
        );
        if let Some(n) = &e.nvram {
            h.push(
                format!("episode{k}/nvram/baseline_mean_ms"),
                format!("episode {k}: baseline with NVRAM"),
                "ms",
                n.baseline.mean_ms,
                "",
            );
            h.push(
                format!("episode{k}/nvram/peak_mean_ms"),
                format!("episode {k}: peak off-load with NVRAM"),
                "ms",
                n.peak.mean_ms,
                "",
            );
        }
    }
}

/// The client's CPU per off-loaded write, the sensitivity (Figure 7) and recovery.
fn part_figures(h: &mut Headlines, r: &Report) {
    h.push(
        "client_us_per_offloaded_write".into(),
        "client core time per off-loaded write".into(),
        "µs",
        r.client_us_per_offloaded_write,
        "56 µs",
    );
    for p in &r.sensitivity {
        h.push(
            format!("fig7/{}/{}/mean_ms", p.parameter, p.value),
            format!("Fig 7: {} = {}, mean", p.parameter, p.value),
            "ms",
            p.mean_ms,
            "",
        );
        h.push(
            format!("fig7/{}/{}/offloaded_mb", p.parameter, p.value),
            format!("Fig 7: {} = {}, off-loaded", p.parameter, p.value),
            "MB",
            Some(p.offloaded_mean_mb),
            "",
        );
    }
    if let Some(rec) = &r.recovery {
        h.push(
            "table3/max_log_mb".into(),
            "Table 3: max log size".into(),
            "MB",
            Some(rec.max_log_bytes as f64 / 1e6),
            "982MB",
        );
        h.push(
            "table3/max_log_records".into(),
            "Table 3: max log records".into(),
            "",
            Some(rec.max_log_records as f64),
            "218505",
        );
        h.push(
            "table3/max_valid_mb".into(),
            "Table 3: max valid data".into(),
            "MB",
            Some(rec.max_valid_bytes as f64 / 1e6),
            "193MB",
        );
        h.push(
            "table3/max_recovery_s".into(),
            "Table 3: max recovery time".into(),
            "s",
            Some(rec.max_store_recovery_s),
            "14.5 s",
        );
    }
}

/// The micro-benchmarks (§4.3, Figure 13).
fn micro_figures(h: &mut Headlines, r: &Report) {
    if let Some(m) = &r.micro {
        for p in &m.read_ratio {
            h.push(
                format!("fig13a/{}", p.x),
                format!("Fig 13a: {} % reads, off-load", p.x),
                "MB/s",
                Some(p.offload_mb_per_s),
                match p.x as u32 {
                    0 => "90 MB/s (the disk's streaming write bandwidth)",
                    100 => "21 MB/s (random-access reads)",
                    _ => "",
                },
            );
        }
        for (name, points) in [
            ("random", &m.reclaim_random),
            ("streaming", &m.reclaim_streaming),
        ] {
            for p in points {
                h.push(
                    format!("fig13b/{name}/{}", p.x),
                    format!("Fig 13b: reclaim {name}, N_reclaim = {}", p.x),
                    "MB/s",
                    Some(p.offload_mb_per_s),
                    if name == "random" {
                        "a maximum of about 20 MB/s"
                    } else {
                        "up to 70% of the streaming bandwidth"
                    },
                );
            }
        }
        for p in &m.stores {
            h.push(
                format!("fig13c/{}", p.x),
                format!("Fig 13c: {} stores", p.x),
                "MB/s",
                Some(p.offload_mb_per_s),
                if p.x == 3.0 {
                    "206 MB/s (CPU-bound)"
                } else {
                    "linear up to 2 stores"
                },
            );
        }
    }
}
