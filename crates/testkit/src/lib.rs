//! Helpers shared by the test suites (a dev-dependency only): the real-trace fragments, seeded
//! schedules ([`Schedules`]), the reference model of a block volume ([`model`]), and real
//! processes ([`process`]: `cordillera_procs::process` with what only tests want), an NBD
//! export as a loop device with a file system ([`nbd_loop`]) and a local Sierra cluster of real
//! processes ([`cluster`]) from `cordillera-procs`, which the benchmarks and the command line
//! use directly.

pub mod model;
pub mod process;

pub use cordillera_procs::{cluster, nbd_loop};

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether this is CI's run (`CI` set and not `false` or `0`, as CI sets `CI=true`). There a
/// test that would skip for want of a tool or of `../shared/traces/` fails instead
/// ([`missing`]): the test command installs the tools and CI always has `../shared`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// A test cannot run: `what` says what is missing (a tool, the trace fragments, root). Outside
/// CI it says SKIPPED on both streams (nextest shows stdout of passing tests only with --no-capture, and
/// cargo test hides stderr of passing tests) and the caller returns; under `CI=true` it panics
/// naming what is missing, so that a broken install step cannot pass as a skip.
pub fn missing(what: &str) {
    if in_ci() {
        panic!(
            "CI=true, and {what}: under CI no test may skip (scripts/test.sh installs the tools; CI has ../shared/traces)"
        );
    }
    println!("SKIPPED: {what}");
    eprintln!("SKIPPED: {what}");
}

/// The shared real-trace fragments (`../shared/traces/` beside the repository), or `None`
/// after saying that `test` was SKIPPED when the folder is absent (a failure under CI:
/// [`missing`]). `CORDILLERA_TRACES` overrides the location.
pub fn traces_dir(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("CORDILLERA_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
        });
    if dir.is_dir() {
        Some(dir)
    } else {
        missing(&format!(
            "{test} needs the real traces, not found at {} (set CORDILLERA_TRACES)",
            dir.display()
        ));
        None
    }
}

/// The schedules a seeded simulation test runs: a regression set (every seed that ever
/// failed, plus the first `fixed` seeds), then fresh schedules from a base seed drawn anew on
/// every run, so that each run explores schedules no earlier run tried. How many fresh ones
/// run is set by a time budget ([`Budget`]): as many as fit in it on this machine, and never
/// fewer than its floor. Long campaigns ask for a count instead (`scripts/campaign.sh`).
///
/// Environment, with `PREFIX` the test's own prefix:
/// - `PREFIX_SEED=S` runs schedule `S` alone;
/// - `PREFIX_SCHEDULES=N` runs exactly `N` fresh schedules, whatever the time;
/// - `PREFIX_SECONDS=T` sets the time budget to `T` seconds;
/// - `PREFIX_FIXED=K` runs the first `K` fixed seeds instead of `fixed` (0 for a long campaign
///   of fresh schedules, the regressions still first);
/// - `PREFIX_BASE_SEED=B` starts the fresh schedules at `B` (with `PREFIX_SCHEDULES`, replays a
///   run);
/// - `PREFIX_HASHES=FILE` writes each schedule's seed and its world's event hash to `FILE`
///   ([`Schedules::write_hashes`]): two builds that ran the same schedules event for event
///   write the same file (how a change that should not alter any schedule, a speed-up, is
///   shown not to).
#[derive(Clone, Debug)]
pub struct Schedules {
    /// The family's prefix (`OFFLOAD`, `SIERRA_SHORT`…).
    pub prefix: String,
    /// The seeds run every time, regressions first, then the fixed ones.
    pub seeds: Vec<u64>,
    /// The first fresh seed (`None` when one seed runs alone).
    pub base: Option<u64>,
    /// How many fresh schedules run.
    pub fresh: Fresh,
    /// Whether one seed runs alone (`PREFIX_SEED`).
    pub single: bool,
}

/// How many fresh schedules a run takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fresh {
    /// Exactly this many.
    Count(u64),
    /// As many as start within the budget, counted from the first schedule.
    Budget(Budget),
}

/// A family's time budget: fresh schedules start until `seconds` have passed since the run
/// began (regressions and fixed seeds included), and at least `least` of them run whatever
/// the time, so a slow or busy machine still explores fresh schedules.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    pub seconds: f64,
    pub least: u64,
}

/// Fresh bases start here, far above any fixed seed.
const FRESH_FLOOR: u64 = 1 << 32;

impl Schedules {
    pub fn from_env(prefix: &str, regressions: &[u64], fixed: u64, budget: Budget) -> Schedules {
        let var = |name: &str| -> Option<String> { std::env::var(format!("{prefix}_{name}")).ok() };
        let number = |name: &str| -> Option<u64> {
            var(name).map(|v| {
                v.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{prefix}_{name}={v}: not a whole number"))
            })
        };
        if let Some(seed) = number("SEED") {
            return Schedules {
                prefix: prefix.to_string(),
                seeds: vec![seed],
                base: None,
                fresh: Fresh::Count(0),
                single: true,
            };
        }
        let fresh = match number("SCHEDULES") {
            Some(n) => Fresh::Count(n),
            None => {
                let seconds = var("SECONDS").map_or(budget.seconds, |v| {
                    v.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        .unwrap_or_else(|| panic!("{prefix}_SECONDS={v}: not a number of seconds"))
                });
                Fresh::Budget(Budget { seconds, ..budget })
            }
        };
        let fixed = number("FIXED").unwrap_or(fixed);
        let base = number("BASE_SEED").unwrap_or_else(random_base);
        let mut seeds: Vec<u64> = regressions.to_vec();
        seeds.extend((0..fixed).filter(|s| !regressions.contains(s)));
        let how_many = match fresh {
            Fresh::Count(n) => format!("{n} fresh"),
            Fresh::Budget(b) => format!("fresh ones for {}s (at least {})", b.seconds, b.least),
        };
        println!(
            "{prefix}: {} regression seeds, {fixed} fixed (0..{fixed}), {how_many} from base seed {base}; replay this run with {prefix}_BASE_SEED={base} {prefix}_SCHEDULES=<fresh count>, one schedule with {prefix}_SEED=<seed>",
            regressions.len()
        );
        Schedules {
            prefix: prefix.to_string(),
            seeds,
            base: Some(base),
            fresh,
            single: false,
        }
    }

    /// The `i`-th schedule of this run, if it is to start `elapsed` after the first one.
    fn seed(&self, i: u64, elapsed: Duration) -> Option<u64> {
        if let Some(&s) = self.seeds.get(i as usize) {
            return Some(s);
        }
        let j = i - self.seeds.len() as u64;
        let base = self.base?;
        let start = match self.fresh {
            Fresh::Count(n) => j < n,
            Fresh::Budget(b) => j < b.least || elapsed.as_secs_f64() < b.seconds,
        };
        start.then(|| base.wrapping_add(j))
    }

    /// Runs the schedules on every core (each thread takes the next one when it is free), each
    /// caught ([`run_caught`]); the results in seed order.
    pub fn run<T: Send>(&self, run: fn(u64) -> Result<T, String>) -> Ran<T> {
        let started = Instant::now();
        let next = AtomicU64::new(0);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut results: Vec<(u64, u64, Result<T, String>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(seed) = self.seed(i, started.elapsed()) else {
                                break;
                            };
                            let began = Instant::now();
                            let result = run_caught(seed, run);
                            let took = began.elapsed();
                            if took > Duration::from_secs(10) {
                                eprintln!("schedule {seed} took {took:.1?}");
                            }
                            mine.push((i, seed, result));
                        }
                        mine
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("a schedule thread"))
                .collect()
        });
        results.sort_by_key(|(i, _, _)| *i);
        let fresh = results.len().saturating_sub(self.seeds.len()) as u64;
        Ran {
            results: results.into_iter().map(|(_, s, r)| (s, r)).collect(),
            fresh,
            seconds: started.elapsed().as_secs_f64(),
        }
    }

    /// Prints the run's summary line in the one form `scripts/campaign.sh` reads:
    /// `schedule summary: PREFIX schedules=N fresh=F failed=X seconds=S name=value…`.
    pub fn summary<T>(&self, ran: &Ran<T>, counts: &[(&str, u64)]) {
        let failed = ran.results.iter().filter(|(_, r)| r.is_err()).count();
        let mut line = format!(
            "schedule summary: {} schedules={} fresh={} failed={failed} seconds={:.1}",
            self.prefix,
            ran.results.len(),
            ran.fresh,
            ran.seconds
        );
        for (name, value) in counts {
            line.push_str(&format!(" {name}={value}"));
        }
        println!("{line}");
    }

    /// With `PREFIX_HASHES=FILE` set, writes one line per schedule to `FILE`, in seed order:
    /// the seed and the event hash `hash` reads from its outcome (16 hex digits), or `failed`.
    pub fn write_hashes<T>(&self, ran: &Ran<T>, hash: impl Fn(&T) -> u64) {
        let Some(path) = std::env::var_os(format!("{}_HASHES", self.prefix)) else {
            return;
        };
        let mut lines: Vec<(u64, String)> = ran
            .results
            .iter()
            .map(|(seed, r)| {
                let h = r
                    .as_ref()
                    .map_or("failed".to_string(), |o| format!("{:016x}", hash(o)));
                (*seed, h)
            })
            .collect();
        lines.sort();
        let text: String = lines.iter().map(|(s, h)| format!("{s} {h}\n")).collect();
        std::fs::write(&path, text)
            .unwrap_or_else(|e| panic!("{}_HASHES: cannot write {path:?}: {e}", self.prefix));
    }

    /// How many schedules are run every time (regressions and fixed seeds).
    pub fn len(&self) -> usize {
        self.seeds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seeds.is_empty()
    }
}

/// What [`Schedules::run`] ran: each schedule's seed and outcome, in order; how many were
/// fresh; the wall time.
pub struct Ran<T> {
    pub results: Vec<(u64, Result<T, String>)>,
    pub fresh: u64,
    pub seconds: f64,
}

impl<T> Ran<T> {
    /// How many schedules ran.
    pub fn len(&self) -> usize {
        self.results.len()
    }

    pub fn is_empty(&self) -> bool {
        self.results.is_empty()
    }
}

/// A base seed no earlier run is likely to have used: the clock and the process id, mixed.
fn random_base() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x = cordillera_types::rng::mix64(nanos ^ (u64::from(std::process::id()) << 32));
    FRESH_FLOOR + x % (u64::MAX / 2)
}

/// Runs one schedule; a panic inside (a core's assertion) is a failure like any other.
pub fn run_caught<T>(seed: u64, run: fn(u64) -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(|| run(seed)).unwrap_or_else(|e| {
        let what = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(format!("panicked: {what}"))
    })
}

/// The outcomes, once every schedule succeeded; else a panic naming the failed seeds, the first
/// one's problem and the command that replays it (`{prefix}_SEED=S`, then `command`).
pub fn all_succeeded<'a, T>(
    results: &'a [(u64, Result<T, String>)],
    prefix: &str,
    command: &str,
) -> Vec<&'a T> {
    let mut failed: Vec<(u64, &String)> = results
        .iter()
        .filter_map(|(seed, r)| r.as_ref().err().map(|e| (*seed, e)))
        .collect();
    failed.sort_by_key(|(seed, _)| *seed);
    if let Some((seed, problem)) = failed.first() {
        panic!(
            "{} of {} schedules failed (seeds {:?}); the first, schedule {seed}:\n{problem}\nreproduce: {prefix}_SEED={seed} {command}",
            failed.len(),
            results.len(),
            failed.iter().map(|(s, _)| *s).collect::<Vec<_>>()
        );
    }
    results
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .collect()
}
