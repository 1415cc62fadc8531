//! "What would each mechanism do for my workload?": a trace characterized in one streaming
//! pass, then each lab run on it with settings derived from what the pass found, and a verdict
//! per mechanism — applies, does not apply, or cannot be judged — with the figures behind it,
//! their spread over seeds where the run is seeded, the trace property that drives it and the
//! commands that reproduce every number.
//!
//! - **Peak off-load** (Everest): the trace's busiest episodes replayed without and with
//!   off-loading ([`crate::everest`]), over several simulator seeds.
//! - **Gears** (Sierra): the trace's hourly load, the gears it allows and the energy they
//!   save; with two days or more, how well yesterday's load predicts today's gears
//!   ([`crate::sierra`]).
//! - **Warm-up** (Bonfire): each day's new cache warmed from the day before, at the paper's
//!   middle setting ([`crate::bonfire`]); a trace shorter than two days is cut into shorter
//!   periods, and says so.
//! - **Striping** (narrow vs wide): the paper's advice from the trace's request sizes, rates
//!   and volume skew ([`cordillera_striping::policy`]), and with two or more busy volumes the
//!   paper's §3.4 experiment on them: each volume a stream, partitioned onto arrays (narrow)
//!   or striped over all (wide), replayed on simulated RAID-5 arrays ([`crate::striping`]).
//!
//! Memory is what each lab needs (bounded by working sets and episodes, never the trace).

mod builtin;
mod characterize;
mod guidance;
mod striping;
mod verdicts;

use std::sync::Arc;

use cordillera_trace::RecordReader;
use serde::Serialize;

pub use builtin::builtin;
pub use characterize::*;
pub use striping::striping;
pub use verdicts::*;

/// Opens the trace again (each lab reads it); callable from several threads.
pub type Open = Arc<dyn Fn() -> Result<Box<dyn RecordReader>, String> + Send + Sync>;

#[derive(Clone, Debug)]
pub struct Options {
    /// Seeds of the seeded runs (Everest's simulator, Bonfire's Random-K): `seed` … `seed +
    /// seeds − 1`.
    pub seed: u64,
    pub seeds: u64,
    /// A faster, coarser answer: one seed, the busiest episode only, one warm-up setting.
    pub quick: bool,
    pub threads: usize,
    /// How to reproduce the run from a shell: the trace argument as the user gave it.
    pub trace_arg: String,
    /// The flags that read the trace as advise read it (`--time-unit ns`, `--skip-invalid`),
    /// each a separate word; every reproducing command carries them after the trace.
    pub trace_flags: Vec<String>,
    /// The user's device (`--device`, `--array`); `None`: fitted from the trace's recorded
    /// response times, or Everest's testbed assumed.
    pub device: Option<crate::devices::DeviceSpec>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            seed: 1,
            seeds: 3,
            quick: false,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            trace_arg: String::new(),
            trace_flags: Vec::new(),
            device: None,
        }
    }
}

impl Options {
    pub fn validate(&self) -> Result<(), String> {
        if self.seeds == 0 || self.seeds > 100 || self.seed.checked_add(self.seeds).is_none() {
            return Err("--seeds must be 1 to 100 (and --seed + --seeds must not overflow)".into());
        }
        if self.threads == 0 {
            return Err("--threads must be positive".into());
        }
        Ok(())
    }

    /// The seeds actually run.
    pub fn seed_list(&self) -> Vec<u64> {
        let n = if self.quick { 1 } else { self.seeds };
        (self.seed..self.seed + n).collect()
    }
}

/// Whether a mechanism would help this workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Applies,
    DoesNotApply,
    /// The trace lacks what the judgement needs (reads, writes, days, time); `why` says what.
    CannotJudge,
}

impl Outcome {
    pub fn text(self) -> &'static str {
        match self {
            Outcome::Applies => "applies",
            Outcome::DoesNotApply => "does not apply",
            Outcome::CannotJudge => "cannot be judged",
        }
    }
}

/// One mechanism's verdict.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// "peak off-load", "gears", "warm-up" or "striping".
    pub mechanism: &'static str,
    /// The paper it comes from.
    pub paper: &'static str,
    pub outcome: Outcome,
    /// One line: what it buys, with its spread.
    pub summary: String,
    /// Why: the trace properties and measurements that decide it.
    pub why: Vec<String>,
    /// The figures behind the summary, each over the seeds run (one value when unseeded),
    /// with the paper's value where it has one.
    pub figures: Vec<crate::spread::Spread>,
    /// Shell commands that reproduce each figure with the lab itself.
    pub commands: Vec<String>,
    /// What to do next: the command or setting that puts the verdict to use, or the evidence
    /// to bring when it cannot be judged.
    pub next_step: String,
    /// How far the deciding figure is from its threshold, and whether that is borderline.
    pub confidence: Option<Confidence>,
    /// Why the variant chosen beats the others (peak against always off-loading, wide against
    /// narrow, the warm-up scheme, the lowest gear), with their figures and costs.
    pub alternatives: Vec<String>,
}

/// How sure a verdict is: the deciding figure against its threshold.
#[derive(Clone, Debug, Serialize)]
pub struct Confidence {
    /// Within the borderline band of the threshold, or the spread (over seeds or peaks)
    /// straddles it: the verdict could go the other way.
    pub borderline: bool,
    /// In words: "1.27× against the 1.2× threshold (6 % above); one peak".
    pub basis: String,
}

impl Confidence {
    /// `value` (with its spread `min`–`max`) against `threshold`: borderline within `band`
    /// (relative) of it, or when the spread straddles it.
    pub fn of(
        value: f64,
        (min, max): (f64, f64),
        threshold: f64,
        band: f64,
        unit: &str,
        extra: &str,
    ) -> Confidence {
        let relative = (value - threshold) / threshold.abs().max(1e-12);
        let straddles = min < threshold && max >= threshold;
        let borderline = relative.abs() <= band || straddles;
        let num = crate::spread::number;
        let mut basis = format!(
            "{}{unit} against the {}{unit} threshold ({:.0} % {})",
            num(value),
            num(threshold),
            relative.abs() * 100.0,
            if relative >= 0.0 { "above" } else { "below" }
        );
        if min != max {
            basis.push_str(&format!(
                "; {}–{}{unit} across the runs",
                num(min),
                num(max)
            ));
        }
        if straddles {
            basis.push_str(", which straddles the threshold");
        }
        if !extra.is_empty() {
            basis.push_str("; ");
            basis.push_str(extra);
        }
        if borderline {
            basis.push_str(" — borderline: more of the trace could change the verdict");
        }
        Confidence { borderline, basis }
    }
}

/// Everything `advise` found for one trace.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub source: String,
    pub seeds: Vec<u64>,
    pub quick: bool,
    pub characterization: Characterization,
    /// The read miss ratio of an LRU cache at sizes up to the working set (`None` without
    /// reads).
    pub miss_ratio_curve: Option<crate::mrc::MissRatioCurve>,
    /// The device the verdicts are judged on, how it was chosen, recorded against simulated
    /// latency.
    pub device: crate::devices::DeviceChoice,
    pub verdicts: Vec<Verdict>,
    /// The labs' own reports, for the figures a reader wants beyond the verdicts.
    pub details: Details,
    /// Wall time of each step, s.
    pub timings: Vec<(String, f64)>,
}

/// The labs' reports behind the verdicts (absent where the lab did not run).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Details {
    pub everest: Vec<crate::everest::Report>,
    pub sierra: Option<crate::sierra::Report>,
    pub bonfire: Option<crate::bonfire::Report>,
}

/// Records handed to the miss-ratio curve's thread at a time.
const MRC_BATCH: usize = 8192;

/// Characterizes the trace, then judges each mechanism on it.
pub fn run(
    source: &str,
    open: Open,
    options: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, String> {
    options.validate()?;
    let mut timings = Vec::new();
    let started = std::time::Instant::now();
    progress("characterizing the trace (stats, peaks, reaccesses, daily profile; the miss-ratio curve beside it)");
    // The miss-ratio curve is built on a second thread from the characterization's records,
    // handed over in batches.
    let (characterization, miss_ratio_curve) = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<cordillera_trace::Record>>(4);
        let curve = scope.spawn(move || {
            let mut builder = crate::mrc::MrcBuilder::new();
            for batch in rx {
                batch.iter().for_each(|r| builder.add(r));
            }
            builder.finish()
        });
        let mut batch = Vec::with_capacity(MRC_BATCH);
        let mut feed = |r: &cordillera_trace::Record| {
            batch.push(*r);
            if batch.len() == MRC_BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(MRC_BATCH));
                let _ = tx.send(full);
            }
        };
        let c = characterize(source, &*open, progress, &mut feed);
        let _ = tx.send(batch);
        drop(tx);
        let curve = curve
            .join()
            .map_err(|_| "the miss-ratio curve's thread panicked".to_owned());
        (c, curve)
    });
    let characterization = characterization?;
    let miss_ratio_curve = Some(miss_ratio_curve?).filter(|m| m.read_block_accesses > 0);
    timings.push(("characterize".to_owned(), started.elapsed().as_secs_f64()));
    progress("choosing the device the verdicts are judged on");
    let device = crate::devices::choose(options.device.clone(), &characterization.sample);
    let d = &device;
    let mut details = Details::default();
    let mut verdicts = Vec::new();
    let c = &characterization;
    let step = std::time::Instant::now();
    verdicts.push(peak_offload(c, d, &open, options, &mut details, progress));
    timings.push(("peak off-load".to_owned(), step.elapsed().as_secs_f64()));
    let step = std::time::Instant::now();
    verdicts.push(gears(c, &open, options, &mut details, progress));
    timings.push(("gears".to_owned(), step.elapsed().as_secs_f64()));
    let step = std::time::Instant::now();
    verdicts.push(warmup(c, &open, options, &mut details, progress));
    timings.push(("warm-up".to_owned(), step.elapsed().as_secs_f64()));
    let step = std::time::Instant::now();
    verdicts.push(striping(c, d, &open, options, progress));
    timings.push(("striping".to_owned(), step.elapsed().as_secs_f64()));
    Ok(Report {
        source: source.to_owned(),
        seeds: options.seed_list(),
        quick: options.quick,
        characterization,
        miss_ratio_curve,
        device,
        verdicts,
        details,
        timings,
    })
}
