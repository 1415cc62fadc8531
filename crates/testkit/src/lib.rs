//! Helpers shared by the test suites and the benchmarks that drive real processes: the
//! real-trace fragments, seeded schedules ([`Schedules`]), the reference model of a block
//! volume ([`model`]), processes started and waited for by
//! what they print ([`process`]), and an NBD export as a loop device with a file system
//! ([`nbd_loop`]), and a local Sierra cluster of real processes ([`cluster`]).

pub mod cluster;
pub mod model;
pub mod nbd_loop;
pub mod process;

use std::path::PathBuf;

/// The shared real-trace fragments (`../shared/traces/` beside the repository), or `None`
/// after printing that `test` was SKIPPED when the folder is absent. `CORDILLERA_TRACES`
/// overrides the location.
pub fn traces_dir(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("CORDILLERA_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
        });
    if dir.is_dir() {
        Some(dir)
    } else {
        // Both streams: nextest shows stdout of passing tests only with --no-capture, and
        // cargo test hides stderr of passing tests.
        println!(
            "SKIPPED {test}: real traces not found at {} (set CORDILLERA_TRACES)",
            dir.display()
        );
        eprintln!(
            "SKIPPED {test}: real traces not found at {} (set CORDILLERA_TRACES)",
            dir.display()
        );
        None
    }
}

/// The schedules a seeded simulation test runs: a fixed regression set (every seed that
/// ever failed, plus the first `fixed` seeds) and `fresh` schedules from a base seed drawn
/// anew on every run, so that each run explores schedules no earlier run tried.
///
/// Environment, with `PREFIX` the test's own prefix:
/// - `PREFIX_SEED=S` runs schedule `S` alone;
/// - `PREFIX_SCHEDULES=N` runs `N` fresh schedules (default `fresh`);
/// - `PREFIX_FIXED=K` runs the first `K` fixed seeds instead of `fixed` (0 for a long campaign
///   of fresh schedules in chunks, the regressions still first);
/// - `PREFIX_BASE_SEED=B` starts the fresh schedules at `B` (to replay a run).
#[derive(Clone, Debug)]
pub struct Schedules {
    /// Every seed to run, regressions first.
    pub seeds: Vec<u64>,
    /// The first fresh seed (`None` when one seed runs alone).
    pub base: Option<u64>,
    /// Whether one seed runs alone (`PREFIX_SEED`).
    pub single: bool,
}

/// Fresh bases start here, far above any fixed seed.
const FRESH_FLOOR: u64 = 1 << 32;

impl Schedules {
    pub fn from_env(prefix: &str, regressions: &[u64], fixed: u64, fresh: u64) -> Schedules {
        let var = |name: &str| -> Option<u64> {
            let key = format!("{prefix}_{name}");
            std::env::var(&key).ok().map(|v| {
                v.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{key}={v}: not a number"))
            })
        };
        if let Some(seed) = var("SEED") {
            return Schedules {
                seeds: vec![seed],
                base: None,
                single: true,
            };
        }
        let fresh = var("SCHEDULES").unwrap_or(fresh);
        let fixed = var("FIXED").unwrap_or(fixed);
        let base = var("BASE_SEED").unwrap_or_else(random_base);
        let mut seeds: Vec<u64> = regressions.to_vec();
        seeds.extend((0..fixed).filter(|s| !regressions.contains(s)));
        seeds.extend((0..fresh).map(|i| base.wrapping_add(i)));
        println!(
            "{prefix}: {} regression seeds, {fixed} fixed (0..{fixed}), {fresh} fresh from base seed {base}; replay this run with {prefix}_BASE_SEED={base}, one schedule with {prefix}_SEED=<seed>",
            regressions.len()
        );
        Schedules {
            seeds,
            base: Some(base),
            single: false,
        }
    }

    /// How many schedules run.
    pub fn len(&self) -> usize {
        self.seeds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seeds.is_empty()
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

/// Runs the schedules spread over the cores (each thread takes every k-th seed), each caught.
pub fn run_schedules<T: Send>(
    seeds: &[u64],
    run: fn(u64) -> Result<T, String>,
) -> Vec<(u64, Result<T, String>)> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(seeds.len().max(1));
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let mine: Vec<u64> = seeds.iter().copied().skip(t).step_by(threads).collect();
                scope.spawn(move || {
                    mine.into_iter()
                        .map(|seed| {
                            let started = std::time::Instant::now();
                            let result = run_caught(seed, run);
                            let took = started.elapsed();
                            if took > std::time::Duration::from_secs(10) {
                                eprintln!("schedule {seed} took {took:.1?}");
                            }
                            (seed, result)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a schedule thread"))
            .collect()
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
