//! `cordillera lab striping`: narrow vs wide striping (Goyal, Radkov, Shenoy) on the simulator.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use cordillera_lab::striping::model::{Model, Queue, Sizes, UtilizationOf};
use cordillera_lab::striping::seeds::{self, SeedsConfig, SkewStreams};
use cordillera_lab::striping::{Options, Part};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WideLayout {
    Units,
    Stripes,
}

#[derive(Args)]
pub struct StripingArgs {
    /// Array counts (RAID-5 4+p of Fujitsu MAJ3182MC disks; the paper: 1 to 25).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 4, 8, 16, 25])]
    arrays: Vec<usize>,
    /// Figures to run (2–7 for every --arrays count): 2a (one store per array), 2b (an
    /// anti-correlated large and small store per array), 3 (stripe unit), 4 (utilization), 5
    /// (large size), 6 (writes), 7 (pair correlation), 8 (Figures 8–9: the trace-driven streams
    /// on 4 arrays), 10 (as 8, array 2's two busiest streams stopped after a tenth of the run),
    /// table3 (OLTP beside a sequential reader on two 7+p arrays).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "2a,2b,3,4,5,6,7,8,10,table3"
    )]
    figures: Vec<Part>,
    /// Simulated seconds of each run (one narrow and one wide per point).
    #[arg(long, default_value_t = 600.0)]
    duration_s: f64,
    /// How busy a store keeps its array's disks while ON (§3.2.1: 70–80 %).
    #[arg(long, default_value_t = 0.75)]
    utilization: f64,
    /// Mean ON period, seconds (OFF periods are as long).
    #[arg(long, default_value_t = 10.0)]
    mean_on_s: f64,
    /// How a wide store goes across arrays: `units` (the next array every stripe unit) or
    /// `stripes` (every whole RAID stripe of the store's unit, as a volume manager striping
    /// across arrays would).
    #[arg(long, value_enum, default_value_t = WideLayout::Units)]
    wide_layout: WideLayout,
    /// Figures 2–7, choices the paper leaves open (docs/LAB.md): the disks' queue discipline…
    #[arg(long, default_value = "sptf")]
    disk_queue: Queue,
    /// …what --utilization sets: the load while a store is ON (on) or over the run (mean)…
    #[arg(long, default_value = "on")]
    utilization_of: UtilizationOf,
    /// …each store's MiB (stores fill their arrays when absent)…
    #[arg(long)]
    store_mib: Option<u64>,
    /// …request sizes around each stream's mean (exponential, §3.1, or fixed).
    #[arg(long, default_value = "exponential")]
    sizes: Sizes,
    /// Table 3: the adapter's path to each array, MB/s (SSA: 40; 0 for no limit).
    #[arg(long, default_value_t = cordillera_lab::striping::table3::SSA_LOOP_MB_PER_S)]
    channel_mb_s: f64,
    /// Figures 8–10: a recorded WebSearch fragment to loop as WebSearch 1–3 (an MQSim ASCII5
    /// file such as `umass/umass_websearch_small.mqsim.trace`, time in ns unless --time-unit);
    /// without it WebSearch is generated from Table 2 like the Financial traces.
    #[arg(long)]
    websearch: Option<PathBuf>,
    /// Figures 8–10 on these traces instead of Table 2 (repeat to merge; each volume, an SPC
    /// ASU say, is a stream).
    #[arg(long, conflicts_with = "fragments")]
    trace: Vec<PathBuf>,
    /// Figures 8–10 on the recorded fragments under DIR (`../shared/traces`: UMass, MSR,
    /// CloudPhysics, SYSTOR'17), each volume a stream, each file looped at the speed
    /// that gives it an equal share of Table 2's load (docs/LAB.md).
    #[arg(long, value_name = "DIR", conflicts_with = "websearch")]
    fragments: Option<PathBuf>,
    /// Format of --trace files (detected from content when absent).
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::Format))]
    format: Option<cordillera_trace::Format>,
    /// Unit of ASCII5 timestamps in --trace and --websearch files.
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::TimeUnit))]
    time_unit: Option<cordillera_trace::TimeUnit>,
    /// Figures 8 and 10 on arrays of this device instead of the paper's: a device kind (hdd-7200,
    /// hdd-10k, hdd-15k, sata-ssd, nvme) or model preset. Figures 2–7 and Table 3 keep the
    /// paper's RAID-5 4+p arrays of Fujitsu disks.
    #[arg(long)]
    device: Option<String>,
    /// With --device: each of the 4 arrays of Figures 8 and 10 as LEVEL:DISKS (raid0, raid1,
    /// raid10, raid5; a stripe unit given here is ignored, §3.4's 32 KB stays), or `none` for
    /// one device per array.
    #[arg(long, default_value = "raid5:5", requires = "device")]
    array: String,
    /// Skip malformed lines of --trace instead of stopping at the first.
    #[arg(long)]
    skip_invalid: bool,
    /// Seed of the streams (arrivals, sizes, offsets, ON periods).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No progress on standard error (it is printed whether or not standard error is a
    /// terminal: a status line on a terminal, a line per step otherwise).
    #[arg(long)]
    quiet: bool,
    /// Run this many seeds (--seed, --seed + 1, …) and report each figure's spread.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write points.csv and spread.json here.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: StripingArgs) -> Result<()> {
    crate::lab_io::check_seeds(a.seed, a.seeds)?;
    let is_skew = |f: &Part| matches!(f, Part::F8 | Part::F10);
    if a.device.is_some() && !a.figures.iter().any(is_skew) {
        bail!("--device applies to Figures 8 and 10 only: add --figures 8 (or 10)");
    }
    let array = (a.array != "none").then_some(a.array.as_str());
    let skew_device = (a.device.as_deref())
        .map(|d| cordillera_lab::devices::DeviceSpec::parse(d, array))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let options = Options {
        arrays: a.arrays.clone(),
        duration_s: a.duration_s,
        utilization: a.utilization,
        mean_on_s: a.mean_on_s,
        wide_whole_stripes: a.wide_layout == WideLayout::Stripes,
        model: Model {
            queue: a.disk_queue,
            utilization_of: a.utilization_of,
            store_bytes: a.store_mib.map(|m| m << 20),
            sizes: a.sizes,
        },
        figures: Part::figures(&a.figures),
    };
    options
        .check(a.trace.is_empty() && a.fragments.is_none())
        .map_err(anyhow::Error::msg)?;
    let wants = |f: Part| a.figures.contains(&f);
    let skew = if (wants(Part::F8) || wants(Part::F10)) && !a.trace.is_empty() {
        let inputs = a
            .trace
            .iter()
            .map(|p| crate::lab_io::trace_input(p, a.format, a.time_unit, a.skip_invalid))
            .collect();
        SkewStreams::Trace(seeds::trace_source(inputs).map_err(anyhow::Error::msg)?)
    } else if let Some(dir) = &a.fragments {
        let f = cordillera_lab::striping::fragments::Fragments::scan(dir);
        SkewStreams::Fragments(std::sync::Arc::new(f.map_err(anyhow::Error::msg)?))
    } else {
        SkewStreams::Table2 {
            websearch: a.websearch.clone(),
            time_unit: a.time_unit,
        }
    };
    let config = SeedsConfig {
        options,
        fig8: wants(Part::F8),
        fig10: wants(Part::F10),
        table3: wants(Part::Table3),
        table3_channel_mb_per_s: (a.channel_mb_s != 0.0).then_some(a.channel_mb_s),
        skew,
        skew_device,
        seed: a.seed,
        seeds: a.seeds,
    };
    let reporter = crate::progress::Progress::new(a.quiet);
    let report =
        seeds::run_seeds(&config, &mut |s| reporter.step(s)).map_err(anyhow::Error::msg)?;
    if let Some(dir) = &a.out {
        let svgs = cordillera_lab::render::striping::write_seed_files(dir, &report)?;
        eprintln!("wrote {} SVG figures to {}", svgs.len(), dir.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report.json())?);
        return Ok(());
    }
    print!("{}", cordillera_lab::render::striping::seeds_text(&report));
    if let Some(dir) = &a.out {
        println!(
            "\npoints.csv, spread.json, the SVG figures{} in {}",
            if report.skews.is_empty() {
                ""
            } else {
                ", streams.csv and utilization_cdf.csv"
            },
            dir.display()
        );
    }
    Ok(())
}
