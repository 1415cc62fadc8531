//! §4.4–4.5 on the simulated testbed: the I/O trace replayed through the real cores
//! ([`super::cluster`]), in one pass over the trace feeding a thread per window and
//! configuration.
//!
//! - Figure 11: the steady-state, up-shift and down-shift experiments (§4.5), each on Sierra
//!   (N chunk servers, one logger per rack, the oracle gears) and on the baseline (N + loggers
//!   chunk servers, no loggers, always in the top gear); mean and p99 response time.
//! - Table 2: data logged and the reclaim rate needed (from the trace), the up-shift's reclaim
//!   (measured), the loggers' disk queue in steady state and while reclaiming.
//! - Table 3: the down-shift's primary migrations, their duration and the clients' retries.
//! - Figure 9 (right), measured (`power_sample`): the whole trace, one request in K (1: every
//!   request), replayed on Sierra with the oracle gears, on the baseline and on N chunk servers
//!   always on (the chunk servers' own baseline); energy by the power model, requests failed,
//!   logged bytes at each day's end.

use serde::Serialize;

use cordillera_gears::layout::{Layout, LayoutKind, LayoutSpec, RackPolicy};
use cordillera_gears::model::{Topology, CHUNK_BYTES_EVALUATION, GROUPS_PER_SERVER_DEFAULT};

use cordillera_models::histogram::LatencySummary;
use cordillera_models::power::PowerParams;
use cordillera_sim::kernel::Nanos;

use cordillera_types::rng::SplitMix64;
use cordillera_types::Op;

use std::sync::mpsc;

use super::analysis::{Measured, ScheduleReport};
use super::cluster::Replayed;
use super::Opener;
use job::{Batch, Job, JobSetup};
use need::NeedMeter;
use windows::{choose_windows, Windows};

const S: Nanos = 1_000_000_000;
const MIN: Nanos = 60 * S;
const HOUR: Nanos = 3_600 * S;
/// Replay starts here, after the objects are created and the first gear is in place.
const START: Nanos = 20 * S;
/// Replay clients (§4.3: 9, three per rack).
pub const CLIENTS: usize = 9;

#[derive(Clone, Debug, Serialize)]
pub struct TestbedOptions {
    /// The policy the experiments run (§4.5 runs g_min = 1).
    pub g_min: usize,
    /// Trace time replayed before each experiment's window, to build the state it starts
    /// from (logged data, warm queues); its requests are not measured.
    pub preface_s: u64,
    pub seed: u64,
    pub log_bytes: u64,
    /// Which of `steady`, `up-shift`, `down-shift` to run.
    pub experiments: Vec<String>,
    /// Reclaim jobs at once per chunk server (its budget over all its groups).
    pub reclaim_jobs: usize,
    /// Reclaim as background work (`ClusterSpec::reclaim_busy_disk`).
    pub reclaim_busy_disk: Option<usize>,
    /// §3.6's local copies of logged writes (the default; off to measure what they save).
    pub local_copy: bool,
    /// The measured power run (Figure 9 right): the whole trace replayed on Sierra and on the
    /// baseline with one request in this many (none: no power run).
    pub power_sample: Option<u64>,
    /// Whether an experiment's window may touch the maintenance hours. §4.3 provisions N for
    /// the peak outside them, so in them the top gear is below the load by design and a
    /// full-rate open-loop replay measures overload, not the mechanism the window is about;
    /// by default they are left out of the choice.
    pub maintenance_windows: bool,
}

/// One experiment on one configuration.
#[derive(Clone, Debug, Serialize)]
pub struct ExperimentRun {
    pub config: &'static str,
    /// A shift's window in parts (before it, while reclaim drains, after), each's latency.
    pub phases: Vec<PhaseLatency>,
    pub servers: usize,
    pub loggers: usize,
    pub latency: LatencySummary,
    pub failed: u64,
    /// The first failures, described.
    pub failures: Vec<String>,
    pub client_retries: u64,
    /// Of which after a request timed out (the rest: refused by a server).
    pub client_timeouts: u64,
    pub refused: u64,
    pub migrations: u64,
    /// Σ of each migrated group's time without a primary (ReleasedPrimary → BecomePrimary).
    pub migration_ns_total: u64,
    pub migration_ns_max: u64,
    /// From the first release to the last take-over of the window.
    pub migration_span_ns: u64,
    pub logged_bytes_at_start: u64,
    pub logged_bytes_at_end: u64,
    pub reclaimed_bytes: u64,
    /// Reclaimed bytes over the time from the window's start until nothing was logged (or its
    /// end).
    pub reclaim_mb_per_s: Option<f64>,
    pub reclaim_done_after_s: Option<f64>,
    pub logger_queue_mean: f64,
    /// §3.6 in the window: read pieces of logged data served by primaries' own replicas and
    /// by loggers; reclaimed bytes not written to the primary's replica again.
    pub local_reads: u64,
    pub logger_reads: u64,
    pub reclaim_local_bytes: u64,
    pub requests: u64,
    /// Chunk servers and loggers (by the power model), and chunk servers alone.
    pub energy_j: f64,
    pub chunk_server_energy_j: f64,
    /// Mean fraction of the chunk servers in standby.
    pub asleep_fraction: f64,
    /// Logged bytes at the last second of each whole day of the run.
    pub logged_at_day_end: Vec<u64>,
    /// Logged bytes at the end of each hour of the trace, from the first whole hour measured:
    /// (trace hour, bytes). What a day logs below the top gear is reclaimed in the top gear
    /// after it (the maintenance hours after midnight), so each day's lowest value, not its
    /// last, shows whether logged data grows day over day.
    pub logged_hourly: Vec<(i64, u64)>,
    /// One request in this many was replayed.
    pub sample: u64,
    pub wall_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Experiment {
    pub name: &'static str,
    /// Trace hours the window covers: [from, to) in seconds since the first day's midnight.
    pub from_s: u64,
    pub to_s: u64,
    /// The gear shift it is about, if any (seconds since midnight of the first day).
    pub shift_at_s: Option<u64>,
    pub gears: (usize, usize),
    /// Whether the window touches a maintenance hour (chosen there only when no window of its
    /// kind qualifies outside them, or with `maintenance_windows`).
    pub in_maintenance: bool,
    pub runs: Vec<ExperimentRun>,
}

/// The response times of a part of a window.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseLatency {
    pub phase: &'static str,
    /// Trace seconds since the first day's midnight, whole minutes.
    pub from_s: i64,
    pub to_s: i64,
    pub latency: LatencySummary,
}

/// Table 2's top half, from the trace and the schedule.
#[derive(Clone, Debug, Serialize)]
pub struct ReclaimNeed {
    /// Unique bytes written while below the top gear, summed over the low-gear stretches.
    pub logged_bytes_total: u64,
    /// Every byte written while below the top gear, overwrites included (what the loggers
    /// take in; `logged_bytes_total` is what they must still hold at the up-shifts).
    pub written_bytes_total: u64,
    /// Bytes written in the whole trace, and read.
    pub trace_written_bytes: u64,
    pub trace_read_bytes: u64,
    pub hours_in_top_gear: usize,
    pub required_mb_per_s: f64,
    /// The largest low-gear stretch's unique bytes, and the up-shift ending it (hour).
    pub largest_bytes: u64,
    pub largest_upshift_hour: Option<i64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TestbedReport {
    pub options: TestbedOptions,
    pub trace: String,
    pub chunk_servers: usize,
    pub loggers: usize,
    pub need: ReclaimNeed,
    /// The trace's maintenance hours of day (left out of the windows' choice unless
    /// `options.maintenance_windows`).
    pub maintenance_hours: Vec<usize>,
    /// The windows of §4.5, and `power` (the whole trace) with `--power-run`.
    pub experiments: Vec<Experiment>,
}

/// The layout of `per_rack` servers in each of 3 racks, power-aware and rack-aligned.
pub fn testbed_layout(per_rack: u32, seed: u64) -> Result<Layout, String> {
    let topology = Topology::racks(3, per_rack);
    let spec = LayoutSpec {
        kind: LayoutKind::PowerAware,
        racks: RackPolicy::Aligned,
        replicas: 3,
    };
    let groups = topology.servers() * GROUPS_PER_SERVER_DEFAULT as usize;
    Layout::generate(spec, &topology, groups, &mut SplitMix64(seed)).map_err(|e| e.to_string())
}

/// Which configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    Sierra,
    /// N + loggers chunk servers always on, no loggers (§4.3: the same total resources).
    Baseline,
    /// N chunk servers always on, no loggers: the baseline of Figure 9's chunk servers alone
    /// (run for the power run only).
    BaselineN,
}

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Sierra => "sierra",
            Config::Baseline => "baseline",
            Config::BaselineN => "baseline-n",
        }
    }
}

/// Runs the three experiments of §4.5 on Sierra and on the baseline, in one pass over the
/// trace: the windows' runs are threads fed with the trace's requests as the pass reaches them.
/// The smallest logger log the testbed runs with (room for 1 MB chunk writes, the store's
/// cleaning reserve and more than a few seconds of logging).
pub const LOG_BYTES_MIN: u64 = 64 << 20;

pub fn run(
    open: &mut Opener,
    measured: &Measured,
    schedule: &ScheduleReport,
    options: &TestbedOptions,
    power: &PowerParams,
    progress: &mut dyn FnMut(&str),
) -> Result<TestbedReport, String> {
    if options.log_bytes < LOG_BYTES_MIN {
        return Err(format!(
            "a logger's log of {} bytes is too small for the testbed: at least {} MiB",
            options.log_bytes,
            LOG_BYTES_MIN >> 20
        ));
    }
    let g_index = schedule
        .g_mins
        .iter()
        .position(|&g| g == options.g_min)
        .ok_or_else(|| format!("g_min {} was not scheduled", options.g_min))?;
    let gears: Vec<(i64, usize)> = schedule
        .hours
        .iter()
        .map(|x| (x.hour, x.gears[g_index]))
        .collect();
    let gear_of = |h: i64| gears.iter().find(|x| x.0 == h).map_or(3, |x| x.1);
    let top = gears.iter().map(|x| x.1).max().unwrap_or(3);
    let maintenance = |h: i64| {
        measured
            .maintenance_hours
            .contains(&(h.rem_euclid(24) as usize))
    };
    let h = HOUR as i64;
    let preface = options.preface_s as i64 * S as i64;
    let mut experiments: Vec<Experiment> = Vec::new();
    let windows = windows(schedule, measured, options, g_index, &gears);
    let mut jobs = Vec::new();
    for (i, &(name, from, to, shift)) in windows.iter().enumerate() {
        experiments.push(Experiment {
            name,
            from_s: (from / S as i64) as u64,
            to_s: (to / S as i64) as u64,
            shift_at_s: shift.map(|s| (s / S as i64) as u64),
            gears: (gear_of(from.div_euclid(h)), gear_of((to - 1).div_euclid(h))),
            in_maintenance: name != "power"
                && (from.div_euclid(h)..=(to - 1).div_euclid(h)).any(maintenance),
            runs: Vec::new(),
        });
        jobs.extend(window_jobs(i, (name, from, to, shift), preface, options));
        progress(&format!(
            "testbed: {name}: trace {:.2} h to {:.2} h (gears {} → {}), replayed from {:.2} h",
            from as f64 / h as f64,
            to as f64 / h as f64,
            experiments[i].gears.0,
            experiments[i].gears.1,
            (from - preface).max(0) as f64 / h as f64
        ));
    }
    let setup = JobSetup {
        n: schedule.chunk_servers,
        loggers: schedule.loggers,
        gears: gears.clone(),
        object_bytes: measured
            .volume_bytes
            .iter()
            .map(|e| e.div_ceil(CHUNK_BYTES_EVALUATION).max(1) * CHUNK_BYTES_EVALUATION)
            .collect(),
        options: options.clone(),
        power: *power,
    };
    let hours_in_top_gear = gears.iter().filter(|x| x.1 == top).count();
    let mut need = NeedMeter {
        written: Vec::new(),
        written_total: 0,
        trace_written: 0,
        trace_read: 0,
        stretch_bytes: 0,
        stretches: Vec::new(),
        in_stretch: false,
    };
    let (say_tx, say_rx) = mpsc::channel::<String>();
    let results: Vec<Result<ExperimentRun, String>> = std::thread::scope(|scope| {
        let mut senders: Vec<Option<mpsc::SyncSender<Batch>>> = Vec::new();
        let mut handles = Vec::new();
        for job in &jobs {
            let (tx, rx) = mpsc::sync_channel::<Batch>(8);
            senders.push(Some(tx));
            let setup = setup.clone();
            let say = say_tx.clone();
            let job = job.clone();
            // Each job waits for its first batch, so at most the current window's runs work.
            handles.push(scope.spawn(move || job.run(&setup, rx, &say)));
        }
        drop(say_tx);
        let pass = feed(
            open,
            measured,
            &jobs,
            &mut senders,
            &setup,
            (&mut need, &gear_of, top),
            &say_rx,
            progress,
        );
        // Whatever happened, the jobs end.
        senders.clear();
        let mut out = Vec::new();
        for handle in handles {
            loop {
                while let Ok(line) = say_rx.try_recv() {
                    progress(&line);
                }
                if handle.is_finished() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            out.push(
                handle
                    .join()
                    .unwrap_or_else(|_| Err("a testbed run panicked".into())),
            );
        }
        if let Err(e) = pass {
            out.push(Err(e));
        }
        out
    });
    collect_runs(&jobs, results, &mut experiments, progress)?;
    Ok(TestbedReport {
        options: options.clone(),
        trace: schedule.name.clone(),
        chunk_servers: schedule.chunk_servers,
        loggers: schedule.loggers,
        need: need.finish(hours_in_top_gear),
        maintenance_hours: measured.maintenance_hours.clone(),
        experiments,
    })
}

mod job;
mod need;
mod windows;

#[cfg(test)]
mod tests;

/// One pass over the trace feeding the jobs: each running job gets its window's requests a
/// second at a time (sampled when it samples), and the need meter sees every request
/// (`meter`: the meter, each hour's gear, the top gear).
#[allow(clippy::too_many_arguments)]
fn feed(
    open: &mut Opener,
    measured: &Measured,
    jobs: &[Job],
    senders: &mut [Option<mpsc::SyncSender<Batch>>],
    setup: &JobSetup,
    (need, gear_of, top): (&mut NeedMeter, &dyn Fn(i64) -> usize, usize),
    say_rx: &mpsc::Receiver<String>,
    progress: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let h = HOUR as i64;
    let mut reader = open()?;
    let mut pending: Vec<Vec<Replayed>> = vec![Vec::new(); jobs.len()];
    let mut second: Option<i64> = None;
    let mut records = 0u64;
    loop {
        let record = reader.next_record().map_err(|e| e.to_string())?;
        let t = record
            .as_ref()
            .map_or(i64::MAX, |r| r.time_ns + measured.day_offset_ns);
        let s = t.div_euclid(S as i64);
        // A new second: each running job gets the requests so far and runs up to one
        // second before them (its clients see requests a second ahead).
        if second.is_some_and(|x| s > x) {
            let x = second.expect("some");
            for (j, job) in jobs.iter().enumerate() {
                let Some(tx) = &senders[j] else { continue };
                let edge = (x + 1) * S as i64;
                if edge <= job.from {
                    continue;
                }
                let batch = Batch {
                    requests: std::mem::take(&mut pending[j]),
                    run_until: job.sim_of(edge - S as i64),
                };
                let finished = edge >= job.to;
                if tx.send(batch).is_err() || finished {
                    senders[j] = None;
                }
            }
            while let Ok(line) = say_rx.try_recv() {
                progress(&line);
            }
        }
        let Some(r) = record else { break };
        second = Some(s);
        records += 1;
        if records.is_multiple_of(20_000_000) {
            progress(&format!("testbed: {} M records", records / 1_000_000));
        }
        let hour = t.div_euclid(h);
        need.add(hour, gear_of(hour) < top, &r);
        for (j, job) in jobs.iter().enumerate() {
            if t < job.from || t >= job.to || senders[j].is_none() {
                continue;
            }
            if job.sample > 1 && !records.is_multiple_of(job.sample) {
                continue;
            }
            let object = r.volume.index() as u64;
            let size = setup
                .object_bytes
                .get(object as usize)
                .copied()
                .unwrap_or(0);
            if r.length_bytes == 0 || r.offset_bytes >= size {
                continue;
            }
            pending[j].push(Replayed {
                at: job.sim_of(t),
                client: object as usize % CLIENTS,
                object,
                offset_bytes: r.offset_bytes,
                length_bytes: r.length_bytes.min(size - r.offset_bytes),
                write: r.op == Op::Write,
            });
        }
    }
    Ok(())
}

/// The runs of window `i`: on Sierra and the baseline (the power run also on N chunk servers
/// always on), each from `preface` before the window (the power run: from its start), one
/// request in the power sample for the power run.
fn window_jobs(
    i: usize,
    (name, from, to, shift): (&str, i64, i64, Option<i64>),
    preface: i64,
    options: &TestbedOptions,
) -> Vec<Job> {
    let power = name == "power";
    let configs: &[Config] = if power {
        &[Config::Sierra, Config::Baseline, Config::BaselineN]
    } else {
        &[Config::Sierra, Config::Baseline]
    };
    configs
        .iter()
        .map(|&config| Job {
            experiment: i,
            config,
            from: if power { from } else { (from - preface).max(0) },
            measure_from: from,
            to,
            shift,
            sample: if power {
                options.power_sample.unwrap_or(1)
            } else {
                1
            },
        })
        .collect()
}

/// The testbed's windows (name, from, to, shift instant; trace nanoseconds): the steady hour,
/// the up-shift and the down-shift the schedule offers (those asked for), and the whole day
/// for the power run.
fn windows(
    schedule: &ScheduleReport,
    measured: &Measured,
    options: &TestbedOptions,
    g_index: usize,
    gears: &[(i64, usize)],
) -> Vec<(&'static str, i64, i64, Option<i64>)> {
    let written: Vec<(i64, u64)> = measured
        .hours
        .iter()
        .map(|h| (h.hour, h.write_bytes))
        .collect();
    let Windows {
        steady,
        upshift,
        downshift,
    } = choose_windows(
        &schedule.hours,
        g_index,
        &written,
        &measured.maintenance_hours,
        options.maintenance_windows,
    );
    let h = HOUR as i64;
    let m = MIN as i64;
    let mut windows: Vec<(&'static str, i64, i64, Option<i64>)> = Vec::new();
    if let Some(h0) = steady {
        windows.push(("steady", h0 * h, h0 * h + h, None));
    }
    if let Some(h0) = upshift {
        windows.push(("up-shift", h0 * h - 10 * m, h0 * h + h, Some(h0 * h)));
    }
    if let Some(h0) = downshift {
        windows.push(("down-shift", h0 * h - 10 * m, h0 * h + 10 * m, Some(h0 * h)));
    }
    windows.retain(|w| options.experiments.iter().any(|e| e == w.0));
    if options.power_sample.is_some() {
        let last = gears.iter().map(|x| x.0).max().unwrap_or(0);
        let first = gears.iter().map(|x| x.0).min().unwrap_or(0);
        windows.push(("power", first * h, (last + 1) * h, None));
    }
    windows
}

/// Each job's run into its experiment, said as it goes; the first failed run is the error.
fn collect_runs(
    jobs: &[Job],
    results: Vec<Result<ExperimentRun, String>>,
    experiments: &mut [Experiment],
    progress: &mut dyn FnMut(&str),
) -> Result<(), String> {
    for (job, result) in jobs.iter().zip(results) {
        let run =
            result.map_err(|e| format!("testbed {}: {e}", experiments[job.experiment].name))?;
        progress(&format!(
            "testbed: {} on {}: {} requests, mean {:.1} ms, p99 {:.1} ms, {} failed ({:.0} s)",
            experiments[job.experiment].name,
            run.config,
            run.requests,
            run.latency.mean_ms.unwrap_or(0.0),
            run.latency.p99_ms.unwrap_or(0.0),
            run.failed,
            run.wall_s
        ));
        experiments[job.experiment].runs.push(run);
    }
    Ok(())
}

/// The testbed's diagnostics from the environment: how often a job says where it is
/// (`CORDILLERA_TESTBED_EVERY_S`, 5 minutes of simulated time by default), and when it dumps
/// its cluster's state (`CORDILLERA_TESTBED_DUMP_AT_S`, never by default).
fn diagnostics() -> (Nanos, Option<Nanos>) {
    let seconds = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let every = seconds("CORDILLERA_TESTBED_EVERY_S").map_or(5 * MIN, |s| s.max(1) * S);
    let dump_at = seconds("CORDILLERA_TESTBED_DUMP_AT_S").map(|s| s * S);
    (every, dump_at)
}
