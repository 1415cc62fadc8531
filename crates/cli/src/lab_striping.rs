//! `cordillera lab striping`: narrow vs wide striping (Goyal, Radkov, Shenoy) on the simulator.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use cordillera_lab::striping::model::{Model, Queue, Sizes, UtilizationOf};
use cordillera_lab::striping::seeds::{self, SeedsConfig, SkewStreams};
use cordillera_lab::striping::{Fig, Options};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FigArg {
    /// Figure 2(a): one store per array, large or small requests.
    #[value(name = "2a")]
    F2a,
    /// Figure 2(b): an anti-correlated large and small store per array.
    #[value(name = "2b")]
    F2b,
    /// Figure 3: the stripe unit (large 128 KB–1 MB, small 8–32 KB).
    #[value(name = "3")]
    F3,
    /// Figure 4: utilization, by inter-arrival times (large 30–100 ms, small 7–15 ms).
    #[value(name = "4")]
    F4,
    /// Figure 5: the large requests' size (64 KB–2 MB; stripe unit half the mean).
    #[value(name = "5")]
    F5,
    /// Figure 6: the fraction of writes (10–90 %).
    #[value(name = "6")]
    F6,
    /// Figure 7: the correlation of each array's pair (−1 … +1), arrays independent or
    /// synchronized.
    #[value(name = "7")]
    F7,
    /// Figures 8 and 9: Table 2's streams (or --trace's volumes) on 4 arrays, per-stream mean
    /// and p95, per-array utilization CDF.
    #[value(name = "8")]
    F8,
    /// Figure 10: as 8, with array 2's two busiest streams stopped after a tenth of the run.
    #[value(name = "10")]
    F10,
    /// Table 3: an OLTP-like store beside a sequential reader (896 KB or 7 MB requests) on two
    /// RAID-5 7+p arrays, closed loop.
    #[value(name = "table3")]
    T3,
}

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
    /// Figures to run (each for every --arrays count).
    #[arg(long, value_delimiter = ',', value_enum, default_values_t = [
        FigArg::F2a, FigArg::F2b, FigArg::F3, FigArg::F4, FigArg::F5, FigArg::F6, FigArg::F7,
        FigArg::F8, FigArg::F10, FigArg::T3
    ])]
    figures: Vec<FigArg>,
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
    #[arg(long)]
    trace: Vec<PathBuf>,
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
    let is_skew = |f: &FigArg| matches!(f, FigArg::F8 | FigArg::F10);
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
        // Figures 8 and 10 and Table 3 are the skew and sequential parts, not simulations.
        figures: a
            .figures
            .iter()
            .filter_map(|f| match f {
                FigArg::F2a => Some(Fig::F2a),
                FigArg::F2b => Some(Fig::F2b),
                FigArg::F3 => Some(Fig::F3),
                FigArg::F4 => Some(Fig::F4),
                FigArg::F5 => Some(Fig::F5),
                FigArg::F6 => Some(Fig::F6),
                FigArg::F7 => Some(Fig::F7),
                FigArg::F8 | FigArg::F10 | FigArg::T3 => None,
            })
            .collect(),
    };
    options
        .check(a.trace.is_empty())
        .map_err(anyhow::Error::msg)?;
    let wants = |f: FigArg| a.figures.contains(&f);
    let skew = if (wants(FigArg::F8) || wants(FigArg::F10)) && !a.trace.is_empty() {
        let inputs = a
            .trace
            .iter()
            .map(|p| crate::lab_io::trace_input(p, a.format, a.time_unit, a.skip_invalid))
            .collect();
        SkewStreams::Trace(seeds::trace_source(inputs).map_err(anyhow::Error::msg)?)
    } else {
        SkewStreams::Table2 {
            websearch: a.websearch.clone(),
            time_unit: a.time_unit,
        }
    };
    let config = SeedsConfig {
        options,
        fig8: wants(FigArg::F8),
        fig10: wants(FigArg::F10),
        table3: wants(FigArg::T3),
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
