//! `lab sierra --seeds K`: the whole lab for each seed in turn (each run already uses every
//! core), then the spread of its headline figures over the seeds.

use std::path::Path;
use std::time::Instant;

use super::headlines::headlines;
use super::{run, Input, Options, Report};
use crate::render::sierra::{write_outputs, write_spread_files};
use crate::spread::{spread, Spread};

/// The runs of several seeds.
pub struct OverSeeds {
    pub seeds: Vec<u64>,
    pub spread: Vec<Spread>,
    /// Each seed's report, when kept.
    pub reports: Vec<Report>,
}

/// Runs the lab for `seeds` with each seed's inputs and options; with `out`, each seed's
/// outputs go to `out/seed-S` and the spread to `out/spread.csv` and `out/spread.json`.
pub fn run_seeds(
    seeds: std::ops::Range<u64>,
    inputs: &dyn Fn(u64) -> Vec<Input>,
    options: &dyn Fn(u64) -> Options,
    out: Option<&Path>,
    keep_reports: bool,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<OverSeeds> {
    let started = Instant::now();
    let (first, count) = (seeds.start, seeds.end - seeds.start);
    let mut runs = Vec::new();
    let mut reports = Vec::new();
    for seed in seeds {
        progress(&format!(
            "lab sierra: seed {seed} ({} of {count}), {:.0} s so far",
            seed - first + 1,
            started.elapsed().as_secs_f64()
        ));
        let report = run(inputs(seed), &options(seed), progress)
            .map_err(|e| anyhow::anyhow!("seed {seed}: {e}"))?;
        if let Some(dir) = out {
            write_outputs(&dir.join(format!("seed-{seed}")), &report)?;
        }
        runs.push((seed, headlines(&report)));
        if keep_reports {
            reports.push(report);
        }
    }
    let rows = spread(&runs);
    let seeds: Vec<u64> = runs.iter().map(|(s, _)| *s).collect();
    if let Some(dir) = out {
        write_spread_files(dir, &seeds, &rows)?;
    }
    Ok(OverSeeds {
        seeds,
        spread: rows,
        reports,
    })
}
