//! `lab bonfire`'s parts on one trace and seed — days warmed from the day before (Table 3,
//! Figures 6–8), the Zipf workload (§6.1), the replay to a new cache's day (§6.2) — and the
//! same over seeds.

use serde::Serialize;

use cordillera_sim::workload::{Generated, Reaccess, Zipf};
use cordillera_trace::RecordReader;

use super::replay::{ReplayOptions, ReplayReport};
use super::{Options, Report, ZipfOptions, ZipfReport};
use crate::input::{OnlyVolumes, TraceInput};

/// Everything `lab bonfire` measured: the per-day experiment, the Zipf experiment, the replay.
#[derive(Serialize)]
pub struct FullReport {
    pub days: Option<Report>,
    pub zipf: Option<ZipfReport>,
    /// §6.2, Figures 12–15.
    pub replay: Option<ReplayReport>,
}

/// Which parts run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    pub days: bool,
    pub zipf: bool,
    pub replay: bool,
}

/// What the parts run on: the trace (`None`: gen:reaccess of `days` days, drawn per seed),
/// the volumes kept (all when empty), the replay's and the Zipf workload's settings (the
/// replay's day length, day start and thresholds are taken from [`Options`]; the Zipf
/// workload's seed is the run's).
pub struct PartsConfig {
    pub parts: Parts,
    pub trace: Option<TraceInput>,
    pub volumes: Vec<String>,
    pub days: u64,
    pub replay: ReplayOptions,
    pub zipf: ZipfOptions,
}

type Open = Box<dyn FnMut() -> Result<Box<dyn RecordReader>, String>>;

/// One run at `seed` (the generated trace's, Random-K's and the Zipf workload's).
pub fn run_parts(
    c: &PartsConfig,
    o: &Options,
    seed: u64,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<FullReport, String> {
    let mut full = FullReport {
        days: None,
        zipf: None,
        replay: None,
    };
    if c.parts.days || c.parts.replay {
        let (source, mut inner): (String, Open) = match &c.trace {
            Some(input) => {
                let input = input.clone();
                (
                    input.file.display().to_string(),
                    Box::new(move || input.open().map_err(|e| format!("{e:#}"))),
                )
            }
            None => {
                let w = Reaccess {
                    days: c.days,
                    seed,
                    ..Reaccess::bonfire()
                };
                w.validate()?;
                (
                    format!("gen:reaccess:days={},seed={seed}", c.days),
                    Box::new(move || {
                        Ok(
                            Box::new(Generated::new(&w.volume_names(), Box::new(w.records())))
                                as Box<dyn RecordReader>,
                        )
                    }),
                )
            }
        };
        // Only the volumes asked for (checked against the trace's names).
        let wanted = c.volumes.clone();
        let mut open = move || -> Result<Box<dyn RecordReader>, String> {
            let reader = inner()?;
            if wanted.is_empty() {
                return Ok(reader);
            }
            Ok(Box::new(OnlyVolumes::new(reader, &wanted)))
        };
        if c.parts.days {
            full.days = Some(super::run_stream(&source, &mut open, o, progress)?);
        }
        if c.parts.replay {
            let r = ReplayOptions {
                day_ns: o.day_ns,
                day_start_hour: o.day_start_hour,
                th_v: o.middle.th_v,
                th_n: o.middle.th_n,
                ..c.replay.clone()
            };
            full.replay = Some(super::replay::replay_stream(
                &source, &mut open, &r, progress,
            )?);
        }
    }
    if c.parts.zipf {
        let z = ZipfOptions {
            workload: Zipf {
                seed,
                ..c.zipf.workload.clone()
            },
            ..c.zipf.clone()
        };
        progress(&format!("Zipf workload: {} reads", z.workload.count));
        full.zipf = Some(super::zipf(&z)?);
    }
    Ok(full)
}

/// The parts at each seed of `seeds` in turn (`o.seed` set to each).
pub fn run_seeds(
    c: &PartsConfig,
    o: &Options,
    seeds: std::ops::Range<u64>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Vec<(u64, FullReport)>, String> {
    let (first, count) = (seeds.start, seeds.end - seeds.start);
    let mut runs = Vec::new();
    for seed in seeds {
        progress(&format!(
            "lab bonfire: seed {seed} ({} of {count})",
            seed - first + 1
        ));
        let o = Options { seed, ..o.clone() };
        runs.push((seed, run_parts(c, &o, seed, progress)?));
    }
    Ok(runs)
}
