//! `cordillera lab sierra`: Sierra §2 and §4 on the simulator, with tables, JSON, CSV and SVG.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use cordillera_lab::render::sierra::{seeds_text, table, write_outputs};
use cordillera_lab::sierra::micro::MicroOptions;
use cordillera_lab::sierra::table5::Table5Setup;
use cordillera_lab::sierra::testbed::TestbedOptions;
use cordillera_lab::sierra::{self, Input, Options};

use crate::lab_io::trace_input;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    Analysis,
    Testbed,
    Micro,
    Predictors,
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use clap::ValueEnum;
        let value = self.to_possible_value().expect("no hidden parts");
        f.write_str(value.get_name())
    }
}

#[derive(Args)]
pub struct SierraArgs {
    /// Traces to analyse instead of the generated Hotmail-like workload (repeat the flag; the
    /// files are merged in time order on their wall clock, e.g. the MSR Cambridge volumes of
    /// one server). A trace of two whole days or more also gets the load-trace analysis
    /// (Figures 1, 2, 8, 9 left). Any format `trace stats` reads, or gen:NAME[:key=value,…].
    #[arg(long = "trace")]
    traces: Vec<PathBuf>,
    /// The traces' format (detected from their content when absent).
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::Format))]
    format: Option<cordillera_trace::Format>,
    /// The time unit of traces whose format does not fix it (ASCII5).
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::TimeUnit))]
    time_unit: Option<cordillera_trace::TimeUnit>,
    /// Skip malformed trace lines instead of stopping at the first.
    #[arg(long)]
    skip_invalid: bool,
    /// Hours from the traces' clock (UTC) to the service's local time, for hours of day.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    utc_offset_hours: i64,
    /// Hours of day in the traces' maintenance window: run in the top gear and left out of
    /// provisioning (§4.3). The generated workload's window is 0,1.
    #[arg(long, value_delimiter = ',')]
    maintenance_hours: Vec<usize>,
    /// Days of the generated load trace for Figures 1, 2, 8, 9 (the paper's are a week).
    #[arg(long, default_value_t = 7)]
    week_days: u64,
    /// The generated load trace's request rate as a fraction of the I/O trace's: §4.1's metric
    /// is hourly bytes normalised to the peak, so the rate only sets the sampling noise.
    #[arg(long, default_value_t = 0.1)]
    week_rate_scale: f64,
    /// Days of the generated I/O trace (§4.2: 48 hours).
    #[arg(long, default_value_t = 2)]
    io_days: u64,
    /// The generated I/O trace's request rate as a fraction of the Hotmail-like default (fewer
    /// chunk servers are then provisioned; the gears' shape is the same).
    #[arg(long, default_value_t = 1.0)]
    io_rate_scale: f64,
    /// Minimum gears to compare (§3.7: 1 for power, 2 for availability; 0 is refused).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2])]
    g_min: Vec<usize>,
    /// Dedicated loggers (§4.3: one per rack).
    #[arg(long, default_value_t = 3)]
    loggers: usize,
    /// Which parts to run: `analysis` (Figures 1, 2, 8, 9, 10 and the MDS state, from the
    /// traces alone) and `testbed` (§4.4–4.5: the I/O trace replayed through the real cores on
    /// the simulated testbed: Figure 11, Tables 2 and 3) and `micro` (§4.6: Table 5's
    /// throughput of 9 clients on 9 chunk servers, Figure 12's rebuild rates) and `predictors`
    /// (the hour-of-day predictor against yesterday, last week and the oracle on generated weeks).
    #[arg(long, value_delimiter = ',', default_values_t = [Part::Analysis, Part::Testbed, Part::Micro, Part::Predictors])]
    parts: Vec<Part>,
    /// Seconds each Table 5 workload is measured.
    #[arg(long, default_value_t = 10)]
    table5_seconds: u64,
    /// Table 5 with this read-ahead (KiB) on the chunk servers' disks in place of the preset's
    /// 256 (0: none) — to see what the streaming reads owe to it.
    #[arg(long)]
    read_ahead_kib: Option<u64>,
    /// Table 5 with the chunk servers' read-ahead (the preset's or --read-ahead-kib's size)
    /// done asynchronously, as a host file cache does (the next window read while the stream
    /// is served from the current one), instead of only when a read misses.
    #[arg(long)]
    read_ahead_async: bool,
    /// Also run Table 5's streaming reads changed in one respect at a time (read-ahead size
    /// and timing, cut-through network, two reads outstanding, one client alone) and in
    /// combination: what holds them below the paper's figure.
    #[arg(long)]
    table5_causes: bool,
    /// GB on the failed server of Figure 12 (the paper: about 200 GB; the rate, not the
    /// size, is the result).
    #[arg(long, default_value_t = 2.0)]
    rebuild_gb: f64,
    /// Figure 12's largest number of servers the failed server's data is rebuilt onto.
    #[arg(long, default_value_t = 4)]
    rebuild_servers: usize,
    /// The g_min of the testbed experiments (§4.5 runs the default policy, 1).
    #[arg(long, default_value_t = 1)]
    testbed_g_min: usize,
    /// Trace time replayed before each testbed experiment's window to build the state it
    /// starts from (logged data, queues); not measured. The paper replays up to 8 hours.
    #[arg(long, default_value_t = 600)]
    preface_s: u64,
    /// Reclaim jobs at once per chunk server in the testbed (its budget over all the groups
    /// it is primary of): more reclaims faster and interferes more with clients (§4.5).
    #[arg(long, default_value_t = 4, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    reclaim_jobs: usize,
    /// Reclaim as background work (§4.5): none started while K other disk operations are queued.
    #[arg(long, value_name = "K")]
    reclaim_busy_disk: Option<usize>,
    /// Turn off §3.6's local copies in the testbed: logged writes go to the loggers only, so
    /// their reads are served by the loggers and their reclaim rewrites the primary's replica
    /// (to measure what the copies save).
    #[arg(long)]
    no_local_copy: bool,
    /// Each simulated logger's log in the testbed (at least 64M; a small one fills: 1G).
    #[arg(long, default_value = "100G", value_parser = cordillera_models::presets::parse_size)]
    log_size: u64,
    /// Also replay the whole I/O trace on Sierra and on the baseline to measure power (Figure 9
    /// right): standby from the cores' gear shifts, energy by the power model, every request
    /// answered, logged bytes at each day's end. Long: see --power-sample.
    #[arg(long)]
    power_run: bool,
    /// The power run replays one request in this many (the gears stay those of the full
    /// trace; the disks are less busy than at full rate).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    power_sample: u64,
    /// Let the testbed's windows fall in the maintenance hours (§4.5's choice read literally).
    /// §4.3 provisions N for the peak outside them, so there the top gear is below the load by
    /// design: replayed open loop at full rate, requests queue past the clients' retries and
    /// fail, on Sierra's 15 chunk servers, not the baseline's 18 (seed 3's up-shift lands at
    /// midnight). By default each window is chosen outside them when one of its kind
    /// qualifies there, else among all hours.
    #[arg(long)]
    windows_in_maintenance: bool,
    /// Which testbed experiments to run (§4.5); `none` runs no window and reports Table 2's
    /// reclaim need from one pass over the trace.
    #[arg(long, value_delimiter = ',', default_values_t = ["steady".to_string(), "up-shift".to_string(), "down-shift".to_string()])]
    experiments: Vec<String>,
    /// Seed of the generated workloads and of the testbed (layout, random choices).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No progress on standard error (it is printed whether or not standard error is a
    /// terminal: a status line on a terminal, a line per step otherwise).
    #[arg(long)]
    quiet: bool,
    /// Run the lab for this many seeds (--seed, --seed + 1, …), one after another (each run
    /// already uses every core), and report each headline figure's mean, range and standard
    /// deviation over them beside the paper's; with --out, each seed's full outputs go to
    /// DIR/seed-S and the spread to DIR/spread.csv and DIR/spread.json. K times as long.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Print the report as JSON on standard output.
    #[arg(long)]
    json: bool,
    /// Write report.json, CSV files and SVG figures into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: SierraArgs) -> Result<()> {
    if let Some(h) = a.maintenance_hours.iter().find(|&&h| h >= 24) {
        bail!("--maintenance-hours: {h} is not an hour of the day (0–23)");
    }
    if a.week_days < 2 || a.io_days == 0 || a.week_days > 366 || a.io_days > 366 {
        bail!("--week-days must be 2 to 366 and --io-days 1 to 366");
    }
    let fraction = |x: f64| x > 0.0 && x <= 1.0;
    if !fraction(a.week_rate_scale) || !fraction(a.io_rate_scale) {
        bail!("--week-rate-scale and --io-rate-scale must be in (0, 1]");
    }
    // g_min, the testbed's experiments, Table 5 and Figure 12 (of the parts that run).
    options(&a, a.seed).validate().map_err(anyhow::Error::msg)?;
    crate::lab_io::check_seeds(a.seed, a.seeds)?;
    let reporter = crate::progress::Progress::new(a.quiet);
    let mut progress = |line: &str| reporter.step(line);
    if a.seeds > 1 {
        return run_seeds(&a, &mut progress);
    }
    let report = sierra::run(inputs(&a, a.seed), &options(&a, a.seed), &mut progress)
        .map_err(anyhow::Error::msg)?;
    if let Some(dir) = &a.out {
        write_outputs(dir, &report)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
        if let Some(dir) = &a.out {
            println!(
                "\nreport.json, CSV files and SVG figures in {}",
                dir.display()
            );
        }
    }
    Ok(())
}

fn options(a: &SierraArgs, seed: u64) -> Options {
    Options {
        g_mins: a.g_min.clone(),
        loggers: a.loggers,
        analysis: a.parts.contains(&Part::Analysis),
        testbed: a.parts.contains(&Part::Testbed).then(|| TestbedOptions {
            g_min: a.testbed_g_min,
            preface_s: a.preface_s,
            seed,
            log_bytes: a.log_size,
            experiments: a
                .experiments
                .iter()
                .filter(|e| *e != "none")
                .cloned()
                .collect(),
            reclaim_jobs: a.reclaim_jobs,
            reclaim_busy_disk: a.reclaim_busy_disk,
            local_copy: !a.no_local_copy,
            power_sample: a.power_run.then_some(a.power_sample),
            maintenance_windows: a.windows_in_maintenance,
        }),
        predictors: a.parts.contains(&Part::Predictors).then_some(seed),
        micro: a.parts.contains(&Part::Micro).then_some(MicroOptions {
            measure_s: a.table5_seconds,
            data_per_server_bytes: (a.rebuild_gb * 1e9) as u64,
            max_write_servers: a.rebuild_servers,
            table5: Table5Setup {
                read_ahead_bytes: a.read_ahead_kib.map(|k| k << 10),
                read_ahead_async: a.read_ahead_async,
                ..Table5Setup::default()
            },
            table5_causes: a.table5_causes,
            seed,
        }),
        ..Options::default()
    }
}

/// The traces the lab reads: the generated Hotmail-like load and I/O traces for `seed`, or the
/// user's traces merged into one.
fn inputs(a: &SierraArgs, seed: u64) -> Vec<Input> {
    if a.traces.is_empty() {
        sierra::inputs::generated(
            a.week_days,
            a.week_rate_scale,
            a.io_days,
            a.io_rate_scale,
            &a.maintenance_hours,
            seed,
        )
    } else {
        let inputs = a
            .traces
            .iter()
            .map(|p| trace_input(p, a.format, a.time_unit, a.skip_invalid))
            .collect();
        sierra::inputs::traces(inputs, &a.maintenance_hours, a.utc_offset_hours)
    }
}

/// `--seeds K`: the lab for each seed, then the spread of its headline figures.
fn run_seeds(a: &SierraArgs, progress: &mut dyn FnMut(&str)) -> Result<()> {
    let over = sierra::seeds::run_seeds(
        a.seed..a.seed + a.seeds,
        &|seed| inputs(a, seed),
        &|seed| options(a, seed),
        a.out.as_deref(),
        a.json,
        progress,
    )?;
    let (seeds, rows, reports) = (over.seeds, over.spread, over.reports);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "seeds": seeds, "spread": rows, "runs": reports })
            )?
        );
    } else {
        print!("{}", seeds_text(&seeds, &rows));
        if let Some(dir) = &a.out {
            println!(
                "\nspread.csv and spread.json in {0}; each seed's report, CSV files and SVG figures in {0}/seed-S",
                dir.display()
            );
        }
    }
    Ok(())
}
