//! One window of the testbed replayed on one configuration, in its own thread: the cluster
//! it builds, the requests the pass over the trace sends it, and what it measures.

use std::sync::mpsc;

use cordillera_models::power::PowerParams;
use cordillera_sim::kernel::Nanos;

use super::super::cluster::{energy_j, Cluster, ClusterSpec, Counters, Replayed, ServerLoad};
use super::{
    diagnostics, testbed_layout, Config, ExperimentRun, PhaseLatency, TestbedOptions, HOUR, S,
    START,
};
use cordillera_gears::schedule::{rotation, shift_at, up_shift_lead_ns};
use cordillera_models::histogram::LatencySummary;

/// One run of one window on one configuration, in its own thread.
#[derive(Clone, Debug)]
pub(super) struct Job {
    pub(super) experiment: usize,
    pub(super) config: Config,
    /// Trace time (ns since the first midnight): replay from `from`, measure from
    /// `measure_from`, stop at `to`.
    pub(super) from: i64,
    pub(super) measure_from: i64,
    pub(super) to: i64,
    /// The gear shift the window is about (reclaim is timed from it).
    pub(super) shift: Option<i64>,
    /// One request in this many is replayed (the power run).
    pub(super) sample: u64,
}

/// What the driver sends a job: requests up to a time, then how far to run.
pub(super) struct Batch {
    pub(super) requests: Vec<Replayed>,
    pub(super) run_until: Nanos,
}

/// What a job needs to build its cluster (plain data: it crosses into the job's thread).
#[derive(Clone)]
pub(super) struct JobSetup {
    pub(super) n: usize,
    pub(super) loggers: usize,
    /// Hour of the trace → gear (the chosen policy's).
    pub(super) gears: Vec<(i64, usize)>,
    pub(super) object_bytes: Vec<u64>,
    pub(super) options: TestbedOptions,
    pub(super) power: PowerParams,
}

impl Job {
    pub(super) fn sim_of(&self, trace_ns: i64) -> Nanos {
        (trace_ns - self.from) as Nanos + START
    }

    /// A window with a shift, in parts: before the shift, from it until reclaim drained what
    /// was logged (when it did within the window), and after; cut at whole minutes of the
    /// simulation, as the latency histograms are kept (so the parts' requests add up to the
    /// window's).
    fn phases(
        &self,
        m0: Nanos,
        drained_at: Option<Nanos>,
        end: Nanos,
        summary: impl Fn(Nanos, Nanos) -> LatencySummary,
    ) -> Vec<PhaseLatency> {
        let minute = |t: Nanos| t.div_ceil(60 * S) * 60 * S;
        let Some(shift) = self.shift.map(|s| minute(self.sim_of(s))) else {
            return Vec::new();
        };
        let drained = drained_at.map(minute).filter(|&d| d > shift && d < end);
        let mut cuts = vec![("before the shift", m0, shift)];
        match drained {
            Some(d) => {
                cuts.push(("shift to reclaim drained", shift, d));
                cuts.push(("after reclaim", d, end));
            }
            None => cuts.push(("after the shift", shift, end)),
        }
        let trace_s = |t: Nanos| ((t - START) as i64 + self.from) / S as i64;
        cuts.into_iter()
            .filter(|&(_, a, b)| b > a)
            .map(|(phase, a, b)| PhaseLatency {
                phase,
                from_s: trace_s(a),
                to_s: trace_s(b),
                latency: summary(a, b),
            })
            .collect()
    }

    fn cluster(&self, setup: &JobSetup) -> Result<Cluster, String> {
        let (per_rack, loggers) = match self.config {
            Config::Sierra => (setup.n / 3, setup.loggers),
            Config::Baseline => ((setup.n + setup.loggers) / 3, 0),
            Config::BaselineN => (setup.n / 3, 0),
        };
        let layout = testbed_layout(per_rack as u32, setup.options.seed)?;
        let gear_of = |h: i64| setup.gears.iter().find(|x| x.0 == h).map_or(3, |x| x.1);
        let mut gears = Vec::new();
        if self.config == Config::Sierra {
            let first = self.from.div_euclid(HOUR as i64);
            let last = (self.to - 1).div_euclid(HOUR as i64);
            let lead = up_shift_lead_ns(setup.power.wake_from_standby_ns);
            for h in first..=last {
                // The first hour's gear is in place before the replay starts; up-shifts are
                // made ahead of their hour, so the servers they wake are up when it starts.
                let at = if h == first {
                    S
                } else {
                    shift_at(
                        self.sim_of(h * HOUR as i64),
                        gear_of(h - 1),
                        gear_of(h),
                        lead,
                    )
                    .max(S)
                };
                gears.push((at, gear_of(h), rotation(h.div_euclid(24), 3)));
            }
        }
        let spec = ClusterSpec {
            gears,
            power: setup.power,
            log_bytes: setup.options.log_bytes,
            reclaim_jobs: setup.options.reclaim_jobs,
            reclaim_busy_disk: setup.options.reclaim_busy_disk,
            local_copy: setup.options.local_copy,
            seed: setup.options.seed,
            ..ClusterSpec::new(layout, loggers, setup.object_bytes.clone())
        };
        let mut cluster = Cluster::new(spec, Vec::new())?;
        cluster.start(START - S)?;
        Ok(cluster)
    }

    /// Runs the job on the batches it is sent until the driver hangs up.
    pub(super) fn run(
        &self,
        setup: &JobSetup,
        batches: mpsc::Receiver<Batch>,
        say: &mpsc::Sender<String>,
    ) -> Result<ExperimentRun, String> {
        let wall = std::time::Instant::now();
        let mut cluster = self.cluster(setup)?;
        let m0 = self.sim_of(self.measure_from);
        let end = self.sim_of(self.to);
        let mut start: Option<Counters> = None;
        let mut migrations_before = 0;
        let mut drained_at: Option<Nanos> = None;
        let mut logged_at_day_end = Vec::new();
        let mut logged_hourly = Vec::new();
        let mut t = cluster.now();
        let mut progress = Progress::new(
            format!("job {} {}", self.experiment, self.config.name()),
            say,
        );
        for batch in batches {
            for r in batch.requests {
                cluster.push(r);
            }
            let until = batch.run_until.min(end);
            while t < until {
                t = (t / S + 1) * S;
                let t1 = t.min(until);
                cluster.run_until(t1);
                if start.is_none() && t1 >= m0 {
                    start = Some(cluster.counters());
                    migrations_before = cluster.shared.borrow().migrations.len();
                }
                if let Some(s0) = &start {
                    if drained_at.is_none() && s0.logged_bytes_now > 0 {
                        let now = cluster.counters();
                        if now.logged_bytes_now == 0 {
                            drained_at = Some(now.at_ns);
                        }
                    }
                }
                // The last second of each day of the trace: what is still logged.
                // (Before START the cluster is still being set up.)
                let trace_t = t1 as i64 - START as i64 + self.from;
                if (trace_t + S as i64).rem_euclid(24 * HOUR as i64) == 0 && start.is_some() {
                    logged_at_day_end.push(cluster.counters().logged_bytes_now);
                }
                if (trace_t + S as i64).rem_euclid(HOUR as i64) == 0 && start.is_some() {
                    let hour = (trace_t + S as i64).div_euclid(HOUR as i64) - 1;
                    logged_hourly.push((hour, cluster.counters().logged_bytes_now));
                }
                progress.tick(&cluster, t1, end);
                t = t1;
            }
        }
        cluster.run_until(end);
        let start = start.ok_or("the trace ended before the window")?;
        let stop = cluster.counters();
        let ob = cluster.observed.borrow();
        let latency = ob.window(m0, end).summary();
        let phases = self.phases(m0, drained_at, end, |a, b| ob.window(a, b).summary());
        let shared = cluster.shared.borrow();
        let migrations = &shared.migrations[migrations_before..];
        let reclaimed = stop.reclaimed_bytes - start.reclaimed_bytes;
        // Nothing is reclaimed before an up-shift: the rate is timed from it.
        let reclaim_from = self
            .shift
            .map_or(start.at_ns, |s| self.sim_of(s).max(start.at_ns));
        let reclaim_span = drained_at
            .unwrap_or(stop.at_ns)
            .saturating_sub(reclaim_from)
            .max(1);
        let span = (stop.at_ns - start.at_ns).max(1) as f64;
        let loggers = cluster.spec.loggers;
        let queue_area = stop.logger_queue_area - start.logger_queue_area;
        let asleep: Nanos = stop
            .asleep_ns
            .iter()
            .zip(&start.asleep_ns)
            .map(|(b, a)| b - a)
            .sum();
        Ok(ExperimentRun {
            phases,
            config: self.config.name(),
            servers: cluster.servers(),
            loggers,
            requests: latency.count,
            latency,
            failed: stop.failed - start.failed,
            failures: ob.failures.clone(),
            client_retries: stop.client_retries - start.client_retries,
            client_timeouts: stop.client_timeouts - start.client_timeouts,
            refused: stop.refused - start.refused,
            migrations: migrations.len() as u64,
            migration_ns_total: migrations.iter().map(|m| m.0).sum(),
            migration_ns_max: migrations.iter().map(|m| m.0).max().unwrap_or(0),
            migration_span_ns: match (migrations.first(), migrations.last()) {
                (Some(a), Some(b)) => b.1 - (a.1 - a.0),
                _ => 0,
            },
            logged_bytes_at_start: start.logged_bytes_now,
            logged_bytes_at_end: stop.logged_bytes_now,
            reclaimed_bytes: reclaimed,
            reclaim_mb_per_s: (reclaimed > 0)
                .then(|| reclaimed as f64 / 1e6 / (reclaim_span as f64 / 1e9)),
            reclaim_done_after_s: drained_at.map(|t| t.saturating_sub(reclaim_from) as f64 / 1e9),
            logger_queue_mean: if loggers == 0 {
                0.0
            } else {
                queue_area as f64 / span / loggers as f64
            },
            local_reads: stop.local_reads - start.local_reads,
            logger_reads: stop.logger_reads - start.logger_reads,
            reclaim_local_bytes: stop.reclaim_local_bytes - start.reclaim_local_bytes,
            energy_j: energy_j(&setup.power, &start, &stop),
            chunk_server_energy_j: energy_j(
                &setup.power,
                &Counters {
                    logger_busy_ns: Vec::new(),
                    ..start.clone()
                },
                &Counters {
                    logger_busy_ns: Vec::new(),
                    ..stop.clone()
                },
            ),
            asleep_fraction: asleep as f64 / span / stop.asleep_ns.len().max(1) as f64,
            logged_at_day_end,
            logged_hourly,
            sample: self.sample,
            wall_s: wall.elapsed().as_secs_f64(),
        })
    }
}

/// A job's progress lines on the driver's channel: every `CORDILLERA_TESTBED_EVERY_S` of
/// simulated time the cluster's counters and each chunk server's share since the last line,
/// and the cluster's state dumped once at `CORDILLERA_TESTBED_DUMP_AT_S` ([`diagnostics`]).
struct Progress<'a> {
    label: String,
    say: &'a mpsc::Sender<String>,
    every: Nanos,
    dump_at: Option<Nanos>,
    wall: std::time::Instant,
    last: Option<(Counters, Vec<ServerLoad>)>,
}

impl<'a> Progress<'a> {
    fn new(label: String, say: &'a mpsc::Sender<String>) -> Progress<'a> {
        let (every, dump_at) = diagnostics();
        Progress {
            label,
            say,
            every,
            dump_at,
            wall: std::time::Instant::now(),
            last: None,
        }
    }

    /// The cluster has run to `t1` (a whole second) of a replay ending at `end`.
    fn tick(&mut self, cluster: &Cluster, t1: Nanos, end: Nanos) {
        let label = &self.label;
        if self.dump_at == Some(t1) {
            let _ = self
                .say
                .send(format!("{label} at {} s:\n{}", t1 / S, cluster.describe()));
        }
        if !t1.is_multiple_of(self.every) {
            return;
        }
        let c = cluster.counters();
        let loads = cluster.server_loads();
        if let Some((c0, loads0)) = &self.last {
            let _ = self.say.send(format!(
                "  {label}: {}",
                server_lines(c0, loads0, &c, &loads)
            ));
        }
        let _ = self.say.send(format!(
            "  {label}: {:.0} of {:.0} min, {} requests done, {} failed ({} no space), {} retries ({} timeouts, {} refused: {:?} not primary / lease / unavailable / busy), {:.0} MB logged, {} asleep ({:.0} s)",
            t1.saturating_sub(START) as f64 / 60e9,
            (end - START) as f64 / 60e9,
            c.completed,
            c.failed,
            c.failed_no_space,
            c.client_retries,
            c.client_timeouts,
            c.refused,
            c.refused_by,
            c.logged_bytes_now as f64 / 1e6,
            c.asleep_now,
            self.wall.elapsed().as_secs_f64()
        ));
        self.last = Some((c, loads));
    }
}

/// Per chunk server between two progress lines: awake or asleep, primaries held, GB logged
/// now, and in the interval its disk's busy share, requests served, writes logged and
/// requests refused as busy (to see where a loaded hour's work lands).
fn server_lines(
    c0: &Counters,
    loads0: &[ServerLoad],
    c: &Counters,
    loads: &[ServerLoad],
) -> String {
    let span = c.at_ns.saturating_sub(c0.at_ns).max(1) as f64;
    let mut parts = Vec::new();
    for (i, (now, before)) in loads.iter().zip(loads0).enumerate() {
        let busy = match (c.busy_ns.get(i), c0.busy_ns.get(i)) {
            (Some(b), Some(b0)) => b.saturating_sub(*b0) as f64 / span,
            _ => 0.0,
        };
        let (st, st0) = (&now.stats, &before.stats);
        parts.push(format!(
            "s{i} {} p{} {:.1}GB busy {:.0}% io {} logw {} refbusy {}",
            if now.awake { "up" } else { "zz" },
            now.primaries,
            now.logged_bytes as f64 / 1e9,
            100.0 * busy,
            (st.reads + st.writes).saturating_sub(st0.reads + st0.writes),
            st.logged_writes.saturating_sub(st0.logged_writes),
            st.refused_busy.saturating_sub(st0.refused_busy),
        ));
    }
    parts.join(" | ")
}
